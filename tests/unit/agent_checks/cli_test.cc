// The binaries: `kiln-agent validate` exit codes and report, and the real
// kiln-gpucheck when this build has it (see gpucheck_cli_test.cc).
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/cli_run.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::test::run_command;
using kiln::test::TempTree;

namespace {

std::string agent() { return std::string("'") + KILN_AGENT_BIN + "' "; }

std::string hermetic_flags(const TempTree& t) {
  t.mkdir("sys/bus/pci/devices");
  t.write("kmsg", "");
  return " --sys-root '" + t.path("sys") + "' --proc-root '" + t.path("proc") + "' --kmsg '" + t.path("kmsg") +
         "' --nvml-library /nonexistent/libnvidia-ml.so.1 ";
}

}  // namespace

TEST_CASE("kiln-agent validate exits 0 on a passing CPU-lab plan and prints the report", "[cli]") {
  TempTree t;
  t.write("cpu-lab.json", R"({"name":"cpu-lab","gpu":{"count":0},"jitter":{"duration_s":0.05}})");
  // PATH holds only an empty directory: no vendor tool is found.
  t.mkdir("bin");
  const auto r = run_command("PATH='" + t.path("bin") + "' " + agent() + "validate --plan quick --profile '" +
                             t.path("cpu-lab.json") + "'" + hermetic_flags(t) + "--gpucheck /nonexistent");
  CHECK(r.status == 0);
  const auto report = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(report.is_discarded());
  CHECK(report["result"] == "pass");
  CHECK(report["profile"] == "cpu-lab");
}

TEST_CASE("kiln-agent validate exits 1 when an 8-GPU profile meets this machine", "[cli]") {
  TempTree t;
  t.write("h100.json", R"({"name":"h100-sxm-8x","gpu":{"count":8},"jitter":{"duration_s":0.05}})");
  t.mkdir("bin");
  const auto r = run_command("PATH='" + t.path("bin") + "' " + agent() + "validate --plan quick --profile '" +
                             t.path("h100.json") + "'" + hermetic_flags(t) + "--gpucheck '" + t.path("none") + "'");
  CHECK(r.status == 1);
  const auto report = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(report.is_discarded());
  CHECK(report["result"] == "fail");
  CHECK(report["checks"][0]["details"]["reason"].get<std::string>().rfind("expected 8 GPUs, found 0", 0) == 0);
}

TEST_CASE("kiln-agent validate exits 2 on usage errors and bad input", "[cli]") {
  TempTree t;
  t.write("bad.json", "{not json");
  t.write("ok.json", "{}");
  CHECK(run_command(agent() + "validate --plan quick 2>/dev/null").status == 2);
  CHECK(run_command(agent() + "validate --plan quick --profile '" + t.path("bad.json") + "' 2>/dev/null").status == 2);
  CHECK(run_command(agent() + "validate --plan nope --profile '" + t.path("ok.json") + "' 2>/dev/null").status == 2);
  CHECK(run_command(agent() + "validate --plan quick --profile '" + t.path("ok.json") + "' --frob 1 2>/dev/null")
            .status == 2);
  CHECK(run_command(agent() + "validate --plan quick --profile '" + t.path("absent.json") + "' 2>/dev/null").status ==
        2);
  // `parse` still works next to it.
  CHECK(run_command(agent() + "parse 2>/dev/null").status == 2);
}
