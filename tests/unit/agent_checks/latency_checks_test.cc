// gpudirect_rdma_latency, nccl_latency and gds_read (latency_checks.h): the
// plan wiring, every skip path, and the judgement on real tool outputs
// (shared/fixtures/validation) printed by scripts standing in for the tools.
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include <fstream>
#include <iterator>
#include <string>

#include "agent/validate/checks/latency_checks.h"
#include "agent/validate/checks/plan.h"
#include "tests/unit/agent_checks/plan_helpers.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::test::TempTree;
using kiln::test::check;
using kiln::test::hermetic;
using nlohmann::json;

namespace {

std::string fixture(const std::string& rel) {
  const std::string path = std::string(KILN_FIXTURES_DIR) + "/" + rel;
  if (!std::ifstream(path)) KILN_SKIP("fixture " << path << " absent");
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

kiln::agent::ToolOptions tools(const TempTree& t) {
  t.mkdir("bin");
  t.mkdir("sys/class/infiniband");
  kiln::agent::ToolOptions o;
  o.search_path = t.path("bin");
  o.paths.sys = t.path("sys");
  o.timeout = std::chrono::seconds(20);
  return o;
}

kiln::agent::ValidationProfile gpu_profile(int gpus = 8) {
  kiln::agent::ValidationProfile p;
  p.name = "h100-sxm-8x";
  p.gpu_count = gpus;
  return p;
}

}  // namespace

TEST_CASE("latency checks: in the full plan only, each skipped with its reason when the tool is absent",
          "[plan][latency]") {
  TempTree t;
  const json gpu = {{"name", "h100-sxm-8x"}, {"gpu", {{"count", 8}}}, {"jitter", {{"duration_s", 0.05}}}};
  auto full = kiln::agent::run_plan("full", gpu, hermetic(t));
  REQUIRE(full);
  const json& rdma = check(*full, "gpudirect_rdma_latency");
  CHECK(rdma["status"] == "skip");
  CHECK(rdma["details"]["reason"] == "ib_send_lat not installed");
  CHECK(rdma["unit"] == "us");
  CHECK(check(*full, "nccl_latency")["details"]["reason"] == "all_reduce_perf not installed");
  const json& gds = check(*full, "gds_read");
  CHECK(gds["status"] == "skip");
  CHECK(gds["details"]["reason"] == "gdsio not installed (cuFile / GPUDirect Storage tools absent)");
  // After ib_write_bw, in this order.
  std::vector<std::string> names;
  for (const auto& c : (*full)["checks"]) names.push_back(c["name"]);
  auto at = std::find(names.begin(), names.end(), "ib_write_bw");
  REQUIRE(at != names.end());
  REQUIRE(names.end() - at >= 4);
  CHECK(*(at + 1) == "gpudirect_rdma_latency");
  CHECK(*(at + 2) == "nccl_latency");
  CHECK(*(at + 3) == "gds_read");

  auto quick = kiln::agent::run_plan("quick", gpu, hermetic(t));
  REQUIRE(quick);
  for (const auto& c : (*quick)["checks"])
    for (const char* n : {"gpudirect_rdma_latency", "nccl_latency", "gds_read"}) CHECK(c["name"] != n);

  const json cpu = {{"name", "cpu-lab"}, {"gpu", {{"count", 0}}}, {"jitter", {{"duration_s", 0.05}}}};
  auto none = kiln::agent::run_plan("full", cpu, hermetic(t));
  REQUIRE(none);
  for (const char* n : {"gpudirect_rdma_latency", "nccl_latency", "gds_read"})
    CHECK(check(*none, n)["details"]["reason"] == "profile expects no GPU");
}

TEST_CASE("latency checks: the profile's ceilings and gds.path are read", "[latency]") {
  auto p = kiln::agent::ValidationProfile::from_json(
      {{"thresholds", {{"gpudirect_rdma_latency_us_max", 2.5}, {"nccl_latency_us_max", 40}, {"gds_read_gbps_min", 10}}},
       {"gds", {{"path", "/mnt/nvme/gds.bin"}}}});
  REQUIRE(p);
  CHECK(p->gpudirect_rdma_latency_us_max == 2.5);
  CHECK(p->nccl_latency_us_max == 40);
  CHECK(p->gds_read_gbps_min == 10);
  CHECK(p->gds_path == "/mnt/nvme/gds.bin");
  auto bad = kiln::agent::ValidationProfile::from_json({{"gds", {{"path", 7}}}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().fields.at(0).field == "/gds/path");
}

TEST_CASE("gpudirect_rdma_latency: no RDMA device is a skip, or a fail when ports are expected", "[latency]") {
  TempTree t;
  auto o = tools(t);
  t.script("bin/ib_send_lat", "exit 0\n");
  auto p = gpu_profile();
  auto r = kiln::agent::check_gpudirect_rdma_latency(p, o);
  CHECK(r.status == kiln::agent::CheckStatus::kSkip);
  CHECK(r.details["reason"] == "no RDMA device");
  p.rdma_ports = 8;
  r = kiln::agent::check_gpudirect_rdma_latency(p, o);
  CHECK(r.status == kiln::agent::CheckStatus::kFail);
  CHECK(r.details["reason"] == "no RDMA device to test");
}

TEST_CASE("gpudirect_rdma_latency: ib_send_lat's table judged at 2..64 B", "[latency][fixtures]") {
  const std::string table = fixture("perftest/mlx4-ib-send-lat-all-sizes-client.txt");
  const std::string cuda = fixture("perftest/a30-vgpu-use-cuda-client-mr-alloc-failure.txt");
  TempTree t;
  auto o = tools(t);
  t.mkdir("sys/class/infiniband/mlx5_0");
  t.mkdir("sys/class/infiniband/mlx5_1");
  // The client (last argument 127.0.0.1) prints the CUDA set-up lines of a
  // real --use_cuda run (the first 10 lines of the A30 capture) and then a
  // real latency table; the server just records its arguments.
  const std::string use_cuda = "head -n 10 '" + cuda + "'\n";
  auto script = [&](bool with_cuda) {
    t.script("bin/ib_send_lat",
             "for a; do last=$a; done\n"
             "if [ \"$last\" = 127.0.0.1 ]; then echo \"$@\" > '" + t.path("client.args") + "'\n" +
                 (with_cuda ? use_cuda : "") + "cat '" + table + "'\nelse echo \"$@\" > '" + t.path("server.args") +
                 "'; fi\n");
  };
  script(true);
  auto p = gpu_profile();
  p.gpudirect_rdma_latency_us_max = 2.0;
  auto r = kiln::agent::check_gpudirect_rdma_latency(p, o);
  INFO(r.to_json().dump());
  CHECK(r.status == kiln::agent::CheckStatus::kPass);
  CHECK(r.value == 1.16);  // the worst typical over 2..64 B: 64 B
  CHECK(r.threshold == json{{"max", 2.0}});
  CHECK(r.details["tool"] == "ib_send_lat");
  CHECK(r.details["p99_us"] == 1.76);
  REQUIRE(r.details["sizes"].size() == 6);
  CHECK(r.details["sizes"][0] == json{{"bytes", 2}, {"typical_us", 1.07}, {"p99_us", 1.68}, {"avg_us", 1.11}});
  CHECK(r.details["server_devices"] == json{"mlx5_0", "mlx5_1"});
  CHECK(slurp(t.path("client.args")) == "-d mlx5_1 --use_cuda=1 -a -I 0 -F -n 1000 127.0.0.1\n");
  CHECK(slurp(t.path("server.args")) == "-d mlx5_0 --use_cuda=0 -a -I 0 -F -n 1000\n");

  p.gpudirect_rdma_latency_us_max = 1.1;
  r = kiln::agent::check_gpudirect_rdma_latency(p, o);
  CHECK(r.status == kiln::agent::CheckStatus::kFail);
  CHECK(r.details["reason"] == "GPUDirect RDMA latency 1.16 us (worst typical at 2..64 B), expected at most 1.10");

  script(false);  // a host-memory run is no GPUDirect measurement
  p.gpudirect_rdma_latency_us_max = 2.0;
  r = kiln::agent::check_gpudirect_rdma_latency(p, o);
  CHECK(r.status == kiln::agent::CheckStatus::kFail);
  CHECK(r.details["reason"] == "ib_send_lat did not use a GPU buffer (--use_cuda)");
}

TEST_CASE("gpudirect_rdma_latency: perftest's CUDA refusal fails with its words", "[latency]") {
  TempTree t;
  auto o = tools(t);
  t.mkdir("sys/class/infiniband/mlx5_0");
  t.script("bin/ib_send_lat",
           "echo ---------------------------------------------------------------------------------------\n"
           "echo \"Perftest doesn't support CUDA tests with inline messages\" >&2\nexit 1\n");
  auto r = kiln::agent::check_gpudirect_rdma_latency(gpu_profile(1), o);
  CHECK(r.status == kiln::agent::CheckStatus::kFail);
  CHECK(r.details["reason"] == "Perftest doesn't support CUDA tests with inline messages");
}

TEST_CASE("nccl_latency: all_reduce_perf's 8 B time against the ceiling", "[latency][fixtures]") {
  const std::string table = fixture("nccl-tests/h100-8gpu-single-node-gke-a3-high.txt");
  TempTree t;
  auto o = tools(t);
  t.script("bin/all_reduce_perf", "echo \"$@\" > '" + t.path("args") + "'\ncat '" + table + "'\n");
  auto p = gpu_profile();
  p.nccl_latency_us_max = 40;
  auto r = kiln::agent::check_nccl_latency(p, o);
  INFO(r.to_json().dump());
  CHECK(r.status == kiln::agent::CheckStatus::kPass);
  CHECK(r.value == 33.66);
  CHECK(r.unit == "us");
  CHECK(r.details["tool"] == "all_reduce_perf");
  CHECK(r.details["nodes"] == 1);
  REQUIRE(r.details["sizes"].size() == 14);
  CHECK(r.details["sizes"][13] == json{{"bytes", 65536}, {"time_us", 34.08}});
  CHECK(slurp(t.path("args")) == "-b 8 -e 65536 -f 2 -g 8\n");
  p.nccl_latency_us_max = 30;
  r = kiln::agent::check_nccl_latency(p, o);
  CHECK(r.status == kiln::agent::CheckStatus::kFail);
  CHECK(r.details["reason"] == "all_reduce latency 33.66 us at 8 B, expected at most 30.00");
}

TEST_CASE("gds_read: GPU-direct against host-bounce reads of gds.path", "[latency][fixtures]") {
  const std::string direct = fixture("gdsio/p400-gpud-seq-read-256k.txt");
  const std::string bounce = fixture("gdsio/p400-cpu-gpu-seq-read-256k.txt");
  TempTree t;
  auto o = tools(t);
  t.script("bin/gdsio", "echo \"$@\" >> '" + t.path("args") + "'\ncase \"$*\" in *'-x 0'*) cat '" + direct +
                            "';; *'-x 2'*) cat '" + bounce + "';; esac\n");
  auto p = gpu_profile();
  auto r = kiln::agent::check_gds_read(p, o);
  CHECK(r.status == kiln::agent::CheckStatus::kSkip);
  CHECK(r.details["reason"] == "profile names no file to read (gds.path)");

  p.gds_path = t.path("missing.bin");
  r = kiln::agent::check_gds_read(p, o);
  CHECK(r.status == kiln::agent::CheckStatus::kFail);

  t.write("read.bin", std::string(3 << 20, 'x'));
  p.gds_path = t.path("read.bin");
  p.gds_read_gbps_min = 2.0;
  r = kiln::agent::check_gds_read(p, o);
  INFO(r.to_json().dump());
  CHECK(r.status == kiln::agent::CheckStatus::kPass);
  CHECK(r.value.get<double>() == Approx(1.919940 * 1.073741824));
  CHECK(r.details["gpu_direct_gbps"].get<double>() == Approx(2.0615).epsilon(1e-4));
  CHECK(r.details["host_bounce_gbps"].get<double>() == Approx(1.644660 * 1.073741824));
  CHECK(r.details["ratio"].get<double>() == Approx(1.919940 / 1.644660));
  const std::string args = slurp(t.path("args"));
  CHECK(args.find("-f " + p.gds_path + " -d 0 -w 4 -s 3M -i 1M -x 0 -I 0 -T 10\n") != std::string::npos);
  CHECK(args.find("-x 2 -I 0") != std::string::npos);
  CHECK(args.find("-I 1") == std::string::npos);  // never a write

  p.gds_read_gbps_min = 3.0;
  r = kiln::agent::check_gds_read(p, o);
  CHECK(r.status == kiln::agent::CheckStatus::kFail);
  CHECK(r.details["reason"] == "GPUDirect Storage read 2.06 GB/s, expected at least 3.00");
}
