// The real kiln-gpucheck --multinode, when this build has one. On a machine
// without a GPU it must say so and must not announce a unique id (other
// nodes would wait on it); usage errors exit 2. Through the agent, the same
// failure makes collective_prepare an error with kiln-gpucheck's reason.
#include <catch2/catch.hpp>

#ifdef KILN_GPUCHECK_BIN

#include <string>

#include <nlohmann/json.hpp>

#include "agent/runtime/commands.h"
#include "tests/support/cli_run.h"

using kiln::test::run_command;
using nlohmann::json;

namespace {

std::string gpucheck() { return std::string("'") + KILN_GPUCHECK_BIN + "' --multinode "; }

// The last non-empty line of `out`.
std::string last_line(const std::string& out) {
  std::string s = out;
  while (!s.empty() && s.back() == '\n') s.pop_back();
  const auto nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

}  // namespace

TEST_CASE("kiln-gpucheck --multinode without a GPU fails and gives no unique id", "[gpucheck][multinode]") {
  const auto r = run_command(gpucheck() + "--nodes 2 --node-rank 0 --expect-gpus 8 --max-mib 1 --iterations 1 "
                                          "--timeout-s 5 2>/dev/null");
  CHECK(r.status == 0);
  const json doc = json::parse(last_line(r.out), nullptr, false);
  REQUIRE(doc.is_object());
  REQUIRE(doc["checks"].size() == 1);
  const json& c = doc["checks"][0];
  INFO(r.out);
  CHECK(c["name"] == "nccl_multinode");
  CHECK(c["unit"] == "GB/s");
  if (doc["gpucheck"]["devices"] == 0) {
    CHECK(r.out.find("unique_id") == std::string::npos);
    CHECK(c["status"] == "fail");
    CHECK(c["value"].is_null());
    CHECK(c["details"]["reason"].get<std::string>().rfind("expected 8 GPUs per node, found 0", 0) == 0);
    CHECK(c["details"]["ranks"] == 16);
  }
}

TEST_CASE("kiln-gpucheck --multinode skips when the profile expects no GPU", "[gpucheck][multinode]") {
  const auto r = run_command(gpucheck() + "--nodes 2 --node-rank 0 --expect-gpus 0 2>/dev/null");
  CHECK(r.status == 0);
  CHECK(r.out.find("unique_id") == std::string::npos);
  const json doc = json::parse(last_line(r.out), nullptr, false);
  REQUIRE(doc.is_object());
  CHECK(doc["checks"][0]["status"] == "skip");
}

TEST_CASE("kiln-gpucheck --multinode exits 2 on usage errors", "[gpucheck][multinode]") {
  const std::string id = "nccl:" + std::string(256, 'a');
  CHECK(run_command(gpucheck() + "--node-rank 0 2>/dev/null").status == 2);                      // no --nodes
  CHECK(run_command(gpucheck() + "--nodes 2 2>/dev/null").status == 2);                          // no --node-rank
  CHECK(run_command(gpucheck() + "--nodes 2 --node-rank 1 2>/dev/null").status == 2);            // no --unique-id
  CHECK(run_command(gpucheck() + "--nodes 2 --node-rank 2 --unique-id " + id + " 2>/dev/null").status == 2);
  CHECK(run_command(gpucheck() + "--nodes 2 --node-rank 1 --unique-id nccl:abc 2>/dev/null").status == 2);
  CHECK(run_command(gpucheck() + "--nodes 2 --node-rank 0 --checks nvlink 2>/dev/null").status == 2);
  CHECK(run_command(gpucheck() + "--nodes 2 --node-rank 0 --timeout-s 0 2>/dev/null").status == 2);
  CHECK(run_command(gpucheck() + "--nodes 2 --node-rank 0 --max-mib 16385 2>/dev/null").status == 2);
  CHECK(run_command(gpucheck() + "--nodes 2 --node-rank 0 --bogus 1 2>/dev/null").status == 2);
  CHECK(run_command(std::string("'") + KILN_GPUCHECK_BIN + "' --nodes 2 2>/dev/null").status == 2);
}

TEST_CASE("collective nccl prepare with the real kiln-gpucheck reports why it could not start", "[session][nccl]") {
  kiln::agent::NodeCommandOptions o;
  o.plan.gpucheck = KILN_GPUCHECK_BIN;
  o.power = [](kiln::agent::PowerAction) {};
  kiln::agent::NodeCommands node(o, kiln::Logger(kiln::LogLevel::kOff));
  const json prep = {{"run", "real"}, {"collective", "nccl"}, {"nodes", 2}, {"gpus_per_node", 8},
                     {"max_mib", 1},  {"iterations", 1},      {"timeout_s", 5}};
  const auto prepared = node.run("collective_prepare", prep, "session");
  if (prepared.ok) {
    // A machine with GPUs: the id is real; let rank 0 give up on its peer.
    CHECK(prepared.result["unique_id"].get<std::string>().rfind("nccl:", 0) == 0);
    return;
  }
  CHECK(prepared.error.rfind("collective_prepare: kiln-gpucheck exited before giving a unique id: "
                             "expected 8 GPUs per node, found 0",
                             0) == 0);
}

#endif  // KILN_GPUCHECK_BIN
