// The kiln-agent binary: `parse FORMAT FILE`, --help and bad usage exit codes.
#include <catch2/catch.hpp>

#include "tests/support/cli_run.h"
#include "tests/support/skip.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/unit/agent_parsers/fixtures.h"

namespace {

using Run = kiln::test::CommandRun;

// Runs `kiln-agent <args>` through the shell; stderr is discarded unless
// `args` redirects it.
Run run_agent(const std::string& args) {
  return kiln::test::run_command(std::string("'") + KILN_AGENT_BIN + "' " + args);
}

}  // namespace

TEST_CASE("kiln-agent parse prints the extracted JSON", "[fixtures][cli]") {
  const std::string rel = "nvlink/v100-gpu3-two-links-inactive-issue-excerpt.txt";
  if (!kiln::test::read_fixture(rel)) {
    KILN_SKIP("skipping: fixture " << rel << " absent under " << KILN_FIXTURES_DIR);
  }
  const Run r = run_agent("parse nvlink '" + std::string(KILN_FIXTURES_DIR) + "/" + rel + "' 2>/dev/null");
  CHECK(r.status == 0);
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["format"] == "nvlink");
  CHECK(j["summary"]["inactive_links"] == 2);
  CHECK(j["health"]["status"] == "fail");
}

TEST_CASE("kiln-agent parse reads standard input for '-'", "[cli]") {
  const Run r = run_agent("parse cyclictest - 2>/dev/null <<'EOF'\n"
                          "T: 0 ( 7) P:80 I:200 C: 10 Min:      1 Act:    2 Avg:    2 Max:      9\nEOF");
  CHECK(r.status == 0);
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  CHECK(j["max_latency_us"] == 9);
}

TEST_CASE("kiln-agent usage and errors exit 2 with one line on stderr", "[cli]") {
  CHECK(run_agent("2>/dev/null").status == 2);              // no subcommand: no agent loop yet
  CHECK(run_agent("run 2>/dev/null").status == 2);          // unknown subcommand
  CHECK(run_agent("parse nvlink 2>/dev/null").status == 2); // missing FILE
  const Run help = run_agent("--help");
  CHECK(help.status == 0);
  CHECK(help.out.find("parse FORMAT FILE") != std::string::npos);
  CHECK(help.out.find("smi-query") != std::string::npos);

  const Run unknown = run_agent("parse iperf /dev/null 2>&1 >/dev/null");
  CHECK(unknown.status == 2);
  CHECK(unknown.out.find("unknown format") != std::string::npos);
  CHECK(std::count(unknown.out.begin(), unknown.out.end(), '\n') == 1);

  const Run missing = run_agent("parse topo /nonexistent/kiln-capture.txt 2>&1 >/dev/null");
  CHECK(missing.status == 2);
  CHECK(missing.out.find("cannot open") != std::string::npos);

  const Run wrong = run_agent("parse dcgm - 2>&1 >/dev/null <<'EOF'\nhello world\nEOF");
  CHECK(wrong.status == 2);
  CHECK(wrong.out.find("not dcgmi diag output") != std::string::npos);
  CHECK(std::count(wrong.out.begin(), wrong.out.end(), '\n') == 1);
}
