// The real kiln-gpucheck binary built by this tree. On a machine without a
// GPU it must say so: every check `fail` "no CUDA device found" for an 8-GPU
// expectation, `skip` when told to expect none. On a machine with GPUs the
// same command must produce well-formed results for every check.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_run.h"

using kiln::test::run_command;

namespace {

std::string gpucheck() { return std::string("'") + KILN_GPUCHECK_BIN + "' "; }

}  // namespace

TEST_CASE("kiln-gpucheck reports no CUDA device honestly", "[gpucheck]") {
  const auto r = run_command(gpucheck() + "--expect-gpus 8 --checks nvlink,hbm_bandwidth,pcie_bandwidth,nccl_allreduce "
                                          "--hbm-mib 64 --pcie-mib 16 --nccl-max-mib 16 --iterations 2");
  CHECK(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  REQUIRE(doc["checks"].size() == 4);
  const int devices = doc["gpucheck"]["devices"];
  for (const auto& c : doc["checks"]) {
    INFO(c.dump());
    if (devices == 0) {
      CHECK(c["status"] == "fail");
      CHECK(c["details"]["reason"].get<std::string>().rfind("no CUDA device found (expected 8 GPUs, found 0)", 0) == 0);
    } else {
      CHECK((c["status"] == "pass" || c["status"] == "fail"));
      CHECK(c.contains("value"));
    }
  }
}

TEST_CASE("kiln-gpucheck skips when the profile expects no GPU", "[gpucheck]") {
  const auto r = run_command(gpucheck() + "--expect-gpus 0 --checks nvlink");
  CHECK(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  REQUIRE(doc["checks"].size() == 1);
  if (doc["gpucheck"]["devices"] == 0) CHECK(doc["checks"][0]["status"] == "skip");
}

TEST_CASE("kiln-gpucheck exits 2 on usage errors", "[gpucheck]") {
  CHECK(run_command(gpucheck() + "--checks bogus 2>/dev/null").status == 2);
  CHECK(run_command(gpucheck() + "--frobnicate 2>/dev/null").status == 2);
  CHECK(run_command(gpucheck() + "--iterations 2>/dev/null").status == 2);
  CHECK(run_command(gpucheck() + "--help").status == 0);
}

TEST_CASE("kiln-gpucheck gemm: no GPU fails for a GPU profile and skips for a CPU one, never passes", "[gpucheck]") {
  const auto r = run_command(gpucheck() + "--expect-gpus 8 --checks gemm --gemm-seconds 1");
  CHECK(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  REQUIRE(doc["checks"].size() == 1);
  const auto& c = doc["checks"][0];
  INFO(c.dump());
  CHECK(c["name"] == "gemm");
  CHECK(c["unit"] == "TFLOPS");
  if (doc["gpucheck"]["devices"] == 0) {
    CHECK(c["status"] == "fail");
    CHECK(c["value"].is_null());
    CHECK(c["details"]["reason"].get<std::string>().rfind("no CUDA device found (expected 8 GPUs, found 0)", 0) == 0);
    const auto cpu = nlohmann::json::parse(run_command(gpucheck() + "--expect-gpus 0 --checks gemm").out, nullptr, false);
    REQUIRE_FALSE(cpu.is_discarded());
    CHECK(cpu["checks"][0]["status"] == "skip");
    CHECK(cpu["checks"][0]["unit"] == "TFLOPS");
  } else {
    CHECK((c["status"] == "pass" || c["status"] == "fail"));
    CHECK(c["details"].contains("per_gpu"));
  }
}

TEST_CASE("kiln-gpucheck gemm flags: a bad value is one line naming the flag and exit 2", "[gpucheck]") {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--gemm-seconds 0", "--gemm-seconds must be 1..3600"},
      {"--gemm-seconds 3601", "--gemm-seconds must be 1..3600"},
      {"--gemm-seconds 2x", "--gemm-seconds must be 1..3600"},
      {"--gemm-seconds", "--gemm-seconds needs a value"},
      {"--gemm-dtypes fp8", "--gemm-dtypes must include bf16"},
      {"--gemm-dtypes bf16,fp16", "--gemm-dtypes: unknown type 'fp16' (bf16, fp8, tf32)"},
      {"--gemm-dtypes bf16,fp8,bf16", "--gemm-dtypes: 'bf16' is listed twice"},
      {"--gemm-dtypes ''", "--gemm-dtypes must include bf16"},
      {"--gemm-min-tflops -1", "--gemm-min-tflops must be a number from 0 to 1e6"},
      {"--gemm-min-tflops nan", "--gemm-min-tflops must be a number from 0 to 1e6"},
      {"--gemm-min-tflops inf", "--gemm-min-tflops must be a number from 0 to 1e6"},
      {"--gemm-min-fraction-of-spec 1.5", "--gemm-min-fraction-of-spec must be in (0, 1]"},
      {"--gemm-min-fraction-of-spec 0", "--gemm-min-fraction-of-spec must be in (0, 1]"},
      {"--checks gemm,bogus", "unknown check 'bogus'"},
  };
  for (const auto& [args, line] : bad) {
    INFO(args);
    // stderr only; the shell's status is kiln-gpucheck's.
    const auto r = run_command(gpucheck() + args + " 2>&1 >/dev/null");
    CHECK(r.status == 2);
    CHECK(r.out.substr(0, r.out.find('\n')) == "kiln-gpucheck: " + line);
  }
  CHECK_THAT(run_command(gpucheck() + "--help").out, Catch::Contains("--gemm-seconds N"));
}

TEST_CASE("kiln-gpucheck starts without loading cuBLASLt, which only a GEMM opens", "[gpucheck]") {
  // The dynamic linker's own record of every library it opens for the start.
  const auto r = run_command("LD_DEBUG=files " + gpucheck() + "--help 2>&1 >/dev/null");
  REQUIRE(r.status == 0);
  // The record is there (the CUDA runtime is linked), so an absent name means absent.
  REQUIRE(r.out.find("libcudart") != std::string::npos);
  CHECK(r.out.find("libcublasLt") == std::string::npos);
}
