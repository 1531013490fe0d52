// The real kiln-gpucheck binary built by this tree. On a machine without a
// GPU it must say so: every check `fail` "no CUDA device found" for an 8-GPU
// expectation, `skip` when told to expect none. On a machine with GPUs the
// same command must produce well-formed results for every check.
#include <catch2/catch.hpp>

#include <string>

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
