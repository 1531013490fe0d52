// The plan runner: with and without kiln-gpucheck (a script the test writes
// stands in for it), merging its JSON, its failure modes, and the vendors'
// tools when they are "installed" (scripts on the search path).
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include <fstream>
#include <iterator>
#include <string>

#include "agent/validate/checks/plan.h"
#include "agent/validate/checks/profile.h"
#include "common/clock.h"
#include "tests/unit/agent_checks/plan_helpers.h"
#include "tests/unit/agent_checks/temp_tree.h"

using nlohmann::json;
using kiln::test::TempTree;
using kiln::test::check;
using kiln::test::hermetic;

namespace {

json profile(int gpus) {
  return json{{"name", gpus ? "h100-sxm-8x" : "cpu-lab"},
              {"gpu", {{"count", gpus}, {"model", "H100"}}},
              {"nvlink", {{"links_per_gpu", gpus ? 18 : 0}}},
              {"jitter", {{"duration_s", 0.05}}},
              {"thresholds", {{"jitter_p999_us_max", 50000}, {"hbm_gbps_min", 4080}, {"nccl_busbw_gbps_min", 450}}}};
}

// kiln-gpucheck's output for an 8-GPU node that passes everything, as the
// script prints it; it also records the arguments it was given.
std::string passing_gpucheck(const TempTree& t) {
  return "echo \"$@\" > '" + t.path("gpucheck.args") + "'\n" + R"(cat <<'JSON'
{"gpucheck": {"devices": 8, "nccl": 22809},
 "checks": [
  {"name": "nvlink", "status": "pass", "value": 18, "unit": "links", "threshold": {"min": 18}, "details": {}},
  {"name": "hbm_bandwidth", "status": "pass", "value": 4300.5, "unit": "GB/s", "threshold": {"min": 4080}, "details": {}},
  {"name": "pcie_bandwidth", "status": "pass", "value": 55.1, "unit": "GB/s", "threshold": null, "details": {}},
  {"name": "nccl_allreduce", "status": "pass", "value": 470.2, "unit": "GB/s", "threshold": {"min": 450},
   "details": {"nccl_debug": {"summary": {"transports": ["P2P/CUMEM"]}}}}
 ]}
JSON
)";
}

}  // namespace

TEST_CASE("plan: a CPU profile passes without kiln-gpucheck, GPU checks skipped", "[plan]") {
  TempTree t;
  auto opts = hermetic(t);
  kiln::FakeClock clock(1'700'000'000'000);
  opts.clock = &clock;
  auto report = kiln::agent::run_plan("quick", profile(0), opts);
  REQUIRE(report);
  CHECK((*report)["result"] == "pass");
  CHECK((*report)["plan"] == "quick");
  CHECK((*report)["profile"] == "cpu-lab");
  CHECK((*report)["started_at"] == "2023-11-14T22:13:20.000Z");
  CHECK((*report)["duration_s"].get<double>() >= 0.05);
  for (const char* name : {"gpu_inventory", "gpu_health", "nvlink", "hbm_bandwidth", "pcie_bandwidth",
                           "nccl_allreduce", "nvidia_smi_topo", "dcgm_diag"})
    CHECK(check(*report, name)["status"] == "skip");
  CHECK(check(*report, "jitter")["status"] == "pass");
  // Cheap first: inventory leads, the GPU measurements follow the host checks.
  CHECK((*report)["checks"][0]["name"] == "gpu_inventory");
  CHECK((*report)["checks"][6]["name"] == "nvlink");
}

TEST_CASE("plan: a GPU profile without kiln-gpucheck fails each GPU check with the reason", "[plan]") {
  TempTree t;
  auto report = kiln::agent::run_plan("quick", profile(8), hermetic(t));
  REQUIRE(report);
  CHECK((*report)["result"] == "fail");
  CHECK(check(*report, "gpu_inventory")["details"]["reason"].get<std::string>().rfind("expected 8 GPUs, found 0", 0) == 0);
  for (const char* name : {"nvlink", "hbm_bandwidth", "pcie_bandwidth", "nccl_allreduce"}) {
    const auto& c = check(*report, name);
    CHECK(c["status"] == "fail");
    CHECK(c["details"]["reason"].get<std::string>().find("kiln-gpucheck not found") != std::string::npos);
  }
  CHECK(check(*report, "nvidia_smi_topo")["details"]["reason"] == "nvidia-smi not installed");
  CHECK((*report)["summary"]["fail"].get<int>() >= 6);
}

TEST_CASE("plan: kiln-gpucheck's JSON is merged and it is told the profile's expectations", "[plan]") {
  TempTree t;
  auto opts = hermetic(t);
  t.script("agent/kiln-gpucheck", passing_gpucheck(t));  // found next to kiln-agent
  auto report = kiln::agent::run_plan("full", profile(8), opts);
  REQUIRE(report);
  const auto& hbm = check(*report, "hbm_bandwidth");
  CHECK(hbm["status"] == "pass");
  CHECK(hbm["value"] == 4300.5);
  CHECK(check(*report, "nccl_allreduce")["details"]["nccl_debug"]["summary"]["transports"][0] == "P2P/CUMEM");
  CHECK(check(*report, "nvlink")["details"]["gpucheck"]["devices"] == 8);
  std::ifstream in(t.path("gpucheck.args"));
  const std::string args((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(args.find("--expect-gpus 8") != std::string::npos);
  CHECK(args.find("--nvlink-links 18") != std::string::npos);
  CHECK(args.find("--hbm-min-gbps 4080") != std::string::npos);
  CHECK(args.find("--nccl-min-busbw 450") != std::string::npos);
  CHECK(args.find("--nccl-max-mib 4096") != std::string::npos);  // the full plan sweeps to 4 GiB
  CHECK(args.find("--iterations 20") != std::string::npos);
  // The node still fails: this machine has no NVML, whatever the script says.
  CHECK((*report)["result"] == "fail");
  CHECK(check(*report, "gpu_inventory")["status"] == "fail");
  // The full plan adds the tool runs (not installed here).
  CHECK(check(*report, "nccl_tests")["status"] == "skip");
  CHECK(check(*report, "ib_write_bw")["status"] == "skip");
}

TEST_CASE("plan: a kiln-gpucheck that prints garbage, leaves a check out or hangs fails the GPU checks",
          "[plan]") {
  TempTree t;
  auto opts = hermetic(t);
  SECTION("garbage") {
    t.script("gc", "echo 'Segmentation fault' >&2\nexit 139\n");
    opts.gpucheck = t.path("gc");
    auto report = kiln::agent::run_plan("quick", profile(8), opts);
    REQUIRE(report);
    const std::string why = check(*report, "hbm_bandwidth")["details"]["reason"];
    CHECK(why.find("kiln-gpucheck exited 139 without a JSON report: Segmentation fault") != std::string::npos);
  }
  SECTION("a check left out") {
    t.script("gc", R"(echo '{"checks":[{"name":"nvlink","status":"pass","value":18}]}')" "\n");
    opts.gpucheck = t.path("gc");
    auto report = kiln::agent::run_plan("quick", profile(8), opts);
    REQUIRE(report);
    CHECK(check(*report, "nvlink")["status"] == "pass");
    CHECK(check(*report, "nccl_allreduce")["details"]["reason"] == "kiln-gpucheck did not report nccl_allreduce");
  }
  SECTION("hangs past its deadline") {
    t.script("gc", "sleep 30\n");
    opts.gpucheck = t.path("gc");
    opts.gpucheck_timeout = std::chrono::seconds(1);
    const auto t0 = std::chrono::steady_clock::now();
    auto report = kiln::agent::run_plan("quick", profile(8), opts);
    REQUIRE(report);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    CHECK(check(*report, "pcie_bandwidth")["details"]["reason"].get<std::string>().find("ran past 1 s") !=
          std::string::npos);
  }
  SECTION("a path that is not executable") {
    opts.gpucheck = t.path("absent");
    auto report = kiln::agent::run_plan("quick", profile(8), opts);
    REQUIRE(report);
    CHECK(check(*report, "nvlink")["details"]["reason"].get<std::string>().find("is not an executable file") !=
          std::string::npos);
  }
}

TEST_CASE("plan: installed tools are run and their output judged", "[plan][tools]") {
  TempTree t;
  auto opts = hermetic(t);
  // nvidia-smi topo -m on a 2-GPU node whose GPUs are not NVLinked.
  t.write("topo.txt",
          "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
          "GPU0\t X \tSYS\t0-63\t0\t\tN/A\n"
          "GPU1\tSYS\t X \t0-63\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n");
  t.script("bin/nvidia-smi", "[ \"$1 $2\" = 'topo -m' ] || exit 9\ncat '" + t.path("topo.txt") + "'\n");
  t.script("bin/dcgmi", "[ \"$*\" = 'diag -r 1 -j' ] || exit 9\n" R"(cat <<'JSON'
{"DCGM GPU Diagnostic": {"test_categories": [
  {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}]},
  {"category": "Hardware", "tests": [{"name": "GPU Memory", "results": [{"gpu_ids": "1", "status": "Fail",
     "warnings": [{"warning": "Row remap pending"}]}]}]}]}}
JSON
)");
  json p = profile(2);
  auto report = kiln::agent::run_plan("quick", p, opts);
  REQUIRE(report);
  const auto& topo = check(*report, "nvidia_smi_topo");
  CHECK(topo["status"] == "fail");
  CHECK(topo["value"] == 2);
  CHECK(topo["details"]["reason"] == "not every GPU pair is connected by NVLink");
  const auto& dcgm = check(*report, "dcgm_diag");
  CHECK(dcgm["status"] == "fail");
  CHECK(dcgm["value"] == 1);
  CHECK(dcgm["details"]["reason"] == "DCGM test failed: GPU Memory");
}

TEST_CASE("plan: nccl-tests output is parsed for bus bandwidth", "[plan][tools][fixtures]") {
  const std::string fixture = std::string(KILN_FIXTURES_DIR) + "/nccl-tests/h100-8gpu-single-node-gke-a3-high.txt";
  if (!std::ifstream(fixture)) {
    KILN_SKIP("skipping: fixture " << fixture << " absent");
  }
  TempTree t;
  auto opts = hermetic(t);
  t.script("bin/all_reduce_perf", "cat '" + fixture + "'\n");
  json p = profile(8);
  p["thresholds"]["nccl_busbw_gbps_min"] = 450;
  auto report = kiln::agent::run_plan("full", p, opts);
  REQUIRE(report);
  const auto& nccl = check(*report, "nccl_tests");
  CHECK(nccl["status"] == "pass");
  CHECK(nccl["value"] == 479.93);
  p["thresholds"]["nccl_busbw_gbps_min"] = 500;
  auto strict = kiln::agent::run_plan("full", p, opts);
  REQUIRE(strict);
  CHECK(check(*strict, "nccl_tests")["status"] == "fail");
}

TEST_CASE("plan: unknown plans and malformed profiles are errors, not reports", "[plan]") {
  TempTree t;
  auto bad_plan = kiln::agent::run_plan("burn", profile(0), hermetic(t));
  REQUIRE_FALSE(bad_plan);
  CHECK(bad_plan.error().code == kiln::Code::kInvalidArgument);
  auto bad_profile = kiln::agent::run_plan("quick", json{{"gpu", {{"count", -1}}}}, hermetic(t));
  REQUIRE_FALSE(bad_profile);
  CHECK(bad_profile.error().fields.at(0).field == "/gpu/count");
}

TEST_CASE("plan: the gemm check runs in both plans with the profile's floors, 3 s quick and 20 s full", "[plan]") {
  TempTree t;
  auto opts = hermetic(t);
  t.script("agent/kiln-gpucheck", passing_gpucheck(t));
  json p = profile(8);
  p["thresholds"]["gemm_fraction_of_spec_min"] = 0.7;
  p["thresholds"]["gemm_tflops_min"] = 650;
  auto args_of = [&](const char* plan) {
    auto report = kiln::agent::run_plan(plan, p, opts);
    REQUIRE(report);
    // The stand-in reports no gemm: that is a failure, never a silent pass.
    CHECK(check(*report, "gemm")["status"] == "fail");
    CHECK(check(*report, "gemm")["details"]["reason"] == "kiln-gpucheck did not report gemm");
    std::ifstream in(t.path("gpucheck.args"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string quick = args_of("quick");
  CHECK(quick.find("--checks nvlink,hbm_bandwidth,pcie_bandwidth,nccl_allreduce,gemm ") != std::string::npos);
  CHECK(quick.find("--gemm-seconds 3 ") != std::string::npos);
  CHECK(quick.find("--gemm-min-tflops 650") != std::string::npos);
  CHECK(quick.find("--gemm-min-fraction-of-spec 0.7") != std::string::npos);
  CHECK(args_of("full").find("--gemm-seconds 20 ") != std::string::npos);
}

TEST_CASE("plan: gemm floors out of range are refused naming the field", "[plan]") {
  using kiln::agent::ValidationProfile;
  for (double f : {0.0, 1.5, -0.1}) {
    auto bad = ValidationProfile::from_json(json{{"thresholds", {{"gemm_fraction_of_spec_min", f}}}});
    REQUIRE_FALSE(bad);
    CHECK(bad.error().fields.at(0).field == "/thresholds/gemm_fraction_of_spec_min");
  }
  auto neg = ValidationProfile::from_json(json{{"thresholds", {{"gemm_tflops_min", -5}}}});
  REQUIRE_FALSE(neg);
  CHECK(neg.error().fields.at(0).field == "/thresholds/gemm_tflops_min");
  auto text = ValidationProfile::from_json(json{{"thresholds", {{"gemm_tflops_min", "700"}}}});
  REQUIRE_FALSE(text);
  auto ok = ValidationProfile::from_json(json{{"thresholds", {{"gemm_fraction_of_spec_min", 0.7}}}});
  REQUIRE(ok);
  CHECK(ok->gemm_fraction_of_spec_min == 0.7);
}
