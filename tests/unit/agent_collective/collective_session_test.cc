// collective_prepare / collective_run through NodeCommands, with two
// NodeCommands instances standing in for two nodes' agents. The nccl path
// runs a fake kiln-gpucheck (a shell script) to prove the plumbing.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <string>

#include "agent/runtime/commands.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::agent::CommandOutcome;
using kiln::agent::NodeCommandOptions;
using kiln::agent::NodeCommands;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const kiln::Logger kQuiet(kiln::LogLevel::kOff);
const std::string kNcclId = "nccl:" + std::string(128, 'a') + std::string(128, '0');

NodeCommandOptions node_options(const std::string& gpucheck = "") {
  NodeCommandOptions o;
  o.api_url = "http://127.0.0.1:9/";  // nothing listens: only the route matters
  o.plan.gpucheck = gpucheck;
  o.power = [](kiln::agent::PowerAction) {};
  return o;
}

json tcp_args(const std::string& run, int nodes = 2) {
  return {{"run", run}, {"collective", "tcp"}, {"nodes", nodes}, {"max_mib", 2}, {"iterations", 1},
          {"timeout_s", 10}};
}

json run_args(json prepare, int rank, const std::string& unique_id) {
  prepare["rank"] = rank;
  prepare["unique_id"] = unique_id;
  prepare["min_busbw_gbps"] = nullptr;
  return prepare;
}

std::future<CommandOutcome> run_async(NodeCommands& node, const json& args) {
  return std::async(std::launch::async, [&node, args] { return node.run("collective_run", args, "session"); });
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A stand-in for kiln-gpucheck --multinode: node-rank 0 prints the unique id
// and then waits for the test to create `go`; every rank then prints a line
// of noise and the report. Its arguments are appended to args.log.
void write_fake_gpucheck(const kiln::test::TempTree& t, double busbw = 123.5) {
  const std::string dir = t.root();
  t.script("kiln-gpucheck",
           "echo \"$@\" >> '" + dir + "/args.log'\n"
           "rank=''; prev=''\n"
           "for a in \"$@\"; do [ \"$prev\" = --node-rank ] && rank=\"$a\"; prev=\"$a\"; done\n"
           "if [ \"$rank\" = 0 ]; then\n"
           "  echo '{\"unique_id\": \"" + kNcclId + "\"}'\n"
           "  while [ ! -e '" + dir + "/go' ]; do sleep 0.01; done\n"
           "fi\n"
           "echo 'NCCL INFO some noise'\n"
           "echo '{\"gpucheck\": {\"devices\": 8, \"nccl\": 22809}, \"checks\": [{\"name\": \"nccl_multinode\", "
           "\"status\": \"pass\", \"value\": " + std::to_string(busbw) + ", \"unit\": \"GB/s\", \"threshold\": null, "
           "\"details\": {\"collective\": \"nccl\", \"rank\": '$rank', \"nodes\": 2, \"ranks\": 16, \"sizes\": "
           "[{\"bytes\": 1048576, \"time_us\": 10.0, \"algbw_gbps\": 100.0, \"busbw_gbps\": " + std::to_string(busbw) +
           "}], \"transport\": {\"transports\": [\"NET/IB\"], \"gdrdma\": true}}}]}'\n");
}

}  // namespace

TEST_CASE("two agents run the tcp collective through prepare and run", "[session]") {
  NodeCommands node0(node_options(), kQuiet), node1(node_options(), kQuiet);
  const json prep = tcp_args("alloc-1/1");
  const CommandOutcome prepared = node0.run("collective_prepare", prep, "session");
  REQUIRE(prepared.ok);
  CHECK(prepared.result["run"] == "alloc-1/1");
  const std::string id = prepared.result["unique_id"];
  CHECK(id.rfind("tcp:127.0.0.1:", 0) == 0);

  auto rank0 = run_async(node0, run_args(prep, 0, id));
  auto rank1 = run_async(node1, run_args(prep, 1, id));
  int rank = 0;
  for (auto* f : {&rank0, &rank1}) {
    const CommandOutcome out = f->get();
    INFO(out.error << " " << out.result.dump());
    REQUIRE(out.ok);
    CHECK(out.result["name"] == "nccl_multinode");
    CHECK(out.result["status"] == "pass");
    CHECK(out.result["value"].get<double>() > 0);
    CHECK(out.result["threshold"].is_null());
    CHECK(out.result["details"]["rank"] == rank);
    CHECK(out.result["details"]["run"] == "alloc-1/1");
    CHECK(out.result["details"]["collective"] == "tcp");
    CHECK(out.result["details"]["sizes"].size() == 2);
    ++rank;
  }
  // The participant is consumed: the same run again on rank 0 is an error.
  const CommandOutcome again = node0.run("collective_run", run_args(prep, 0, id), "session");
  CHECK_FALSE(again.ok);
}

TEST_CASE("a floor from collective_run applies to rank 0's prepared root too", "[session]") {
  NodeCommands node0(node_options(), kQuiet), node1(node_options(), kQuiet);
  const json prep = tcp_args("floor");
  const CommandOutcome prepared = node0.run("collective_prepare", prep, "session");
  REQUIRE(prepared.ok);
  json a0 = run_args(prep, 0, prepared.result["unique_id"]);
  a0["min_busbw_gbps"] = 1e9;
  json a1 = a0;
  a1["rank"] = 1;
  auto rank0 = run_async(node0, a0);
  auto rank1 = run_async(node1, a1);
  for (auto* f : {&rank0, &rank1}) {
    const CommandOutcome out = f->get();
    REQUIRE(out.ok);
    CHECK(out.result["status"] == "fail");
    CHECK(out.result["value"].is_number());
    CHECK(out.result["threshold"] == json{{"min", 1e9}});
  }
}

TEST_CASE("collective_run on rank 0 without a matching prepare is an error", "[session]") {
  NodeCommands node0(node_options(), kQuiet);
  const std::string id = "tcp:127.0.0.1:4000:" + std::string(32, 'a');
  const CommandOutcome never = node0.run("collective_run", run_args(tcp_args("nope"), 0, id), "session");
  CHECK_FALSE(never.ok);
  CHECK(never.error == "collective_run: run nope was not prepared on this node (rank 0)");

  const CommandOutcome prepared = node0.run("collective_prepare", tcp_args("yes"), "session");
  REQUIRE(prepared.ok);
  const CommandOutcome other = node0.run("collective_run", run_args(tcp_args("other"), 0, id), "session");
  CHECK_FALSE(other.ok);
  CHECK(other.error.find("run other was not prepared") != std::string::npos);
  // Same run, but not the id prepare answered.
  const CommandOutcome wrong_id = node0.run("collective_run", run_args(tcp_args("yes"), 0, id), "session");
  CHECK_FALSE(wrong_id.ok);
  CHECK(wrong_id.error == "collective_run: unique_id is not the one collective_prepare answered");
  const CommandOutcome wrong_nodes =
      node0.run("collective_run", run_args(tcp_args("yes", 3), 0, prepared.result["unique_id"]), "session");
  CHECK_FALSE(wrong_nodes.ok);
  CHECK(wrong_nodes.error.find("differ from the prepared run's") != std::string::npos);
  // NodeCommands' destructor stops the root still waiting for its peer.
}

TEST_CASE("bad collective arguments are error outcomes naming the field", "[session]") {
  NodeCommands node(node_options(), kQuiet);
  const std::string id = "tcp:127.0.0.1:4000:" + std::string(32, 'a');
  CommandOutcome rank = node.run("collective_run", run_args(tcp_args("r"), 2, id), "session");
  CHECK_FALSE(rank.ok);
  CHECK(rank.error == "collective_run: rank must be 0..1");
  json bad_collective = tcp_args("r");
  bad_collective["collective"] = "gloo";
  CHECK(node.run("collective_prepare", bad_collective, "session").error ==
        "collective_prepare: collective must be \"nccl\" or \"tcp\"");
  json bad_timeout = tcp_args("r");
  bad_timeout["timeout_s"] = 0;
  CHECK(node.run("collective_prepare", bad_timeout, "session").error ==
        "collective_prepare: timeout_s must be 1..3600");
  CHECK_FALSE(node.run("collective_prepare", json::object(), "session").ok);
}

TEST_CASE("prepare without an API URL to pick the address from is an error", "[session]") {
  NodeCommandOptions o = node_options();
  o.api_url = "";
  NodeCommands node(o, kQuiet);
  const CommandOutcome out = node.run("collective_prepare", tcp_args("r"), "session");
  CHECK_FALSE(out.ok);
  CHECK(out.error.rfind("collective_prepare: no local address towards kilnd", 0) == 0);
  // The failure is remembered: rank 0's run reports it as a failed check.
  const CommandOutcome run = node.run("collective_run",
                                      run_args(tcp_args("r"), 0, "tcp:127.0.0.1:1:" + std::string(32, 'a')), "session");
  REQUIRE(run.ok);
  CHECK(run.result["status"] == "fail");
  CHECK(run.result["value"].is_null());
  CHECK(run.result["details"]["reason"].get<std::string>().rfind("collective_prepare failed: no local address", 0) ==
        0);
}

TEST_CASE("a second prepare replaces and stops the first", "[session]") {
  NodeCommands node0(node_options(), kQuiet), node1(node_options(), kQuiet);
  const json first = tcp_args("first"), second = tcp_args("second");
  const CommandOutcome p1 = node0.run("collective_prepare", first, "session");
  REQUIRE(p1.ok);
  const CommandOutcome p2 = node0.run("collective_prepare", second, "session");
  REQUIRE(p2.ok);
  CHECK(p1.result["unique_id"] != p2.result["unique_id"]);

  CHECK_FALSE(node0.run("collective_run", run_args(first, 0, p1.result["unique_id"]), "session").ok);
  // The first root no longer listens: its peer fails at once, not after 10 s.
  const auto t0 = std::chrono::steady_clock::now();
  const CommandOutcome stale = node1.run("collective_run", run_args(first, 1, p1.result["unique_id"]), "session");
  REQUIRE(stale.ok);
  CHECK(stale.result["status"] == "fail");
  CHECK(stale.result["details"]["reason"].get<std::string>().find("cannot connect to the root") == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);

  auto rank0 = run_async(node0, run_args(second, 0, p2.result["unique_id"]));
  auto rank1 = run_async(node1, run_args(second, 1, p2.result["unique_id"]));
  CHECK(rank0.get().result["status"] == "pass");
  CHECK(rank1.get().result["status"] == "pass");
}

TEST_CASE("collective nccl drives kiln-gpucheck --multinode and reads its report", "[session][nccl]") {
  kiln::test::TempTree t;
  write_fake_gpucheck(t);
  NodeCommands node0(node_options(t.path("kiln-gpucheck")), kQuiet);
  NodeCommands node1(node_options(t.path("kiln-gpucheck")), kQuiet);
  const json prep = {{"run", "n1"}, {"collective", "nccl"}, {"nodes", 2}, {"gpus_per_node", 8}, {"max_mib", 64},
                     {"iterations", 3}, {"timeout_s", 30}};
  const CommandOutcome prepared = node0.run("collective_prepare", prep, "session");
  INFO(prepared.error);
  REQUIRE(prepared.ok);
  CHECK(prepared.result == json{{"run", "n1"}, {"unique_id", kNcclId}});
  // Rank 0's kiln-gpucheck is still running (waiting for `go`) after prepare answered.
  const std::string log = read_file(t.path("args.log"));
  CHECK(log == "--multinode --nodes 2 --node-rank 0 --max-mib 64 --iterations 3 --timeout-s 30 --expect-gpus 8\n");

  json a1 = run_args(prep, 1, kNcclId);
  a1["min_busbw_gbps"] = 100;
  const CommandOutcome rank1 = node1.run("collective_run", a1, "session");
  REQUIRE(rank1.ok);
  CHECK(read_file(t.path("args.log")).find("--node-rank 1 --max-mib 64 --iterations 3 --timeout-s 30 --expect-gpus 8 "
                                           "--unique-id " + kNcclId + "\n") != std::string::npos);
  CHECK(rank1.result["status"] == "pass");
  CHECK(rank1.result["value"] == 123.5);
  CHECK(rank1.result["threshold"] == json{{"min", 100}});
  CHECK(rank1.result["details"]["run"] == "n1");
  CHECK(rank1.result["details"]["rank"] == 1);
  CHECK(rank1.result["details"]["ranks"] == 16);
  CHECK(rank1.result["details"]["transport"]["transports"][0] == "NET/IB");
  CHECK(rank1.result["details"]["gpucheck"]["devices"] == 8);

  { std::ofstream go(t.path("go")); }
  json a0 = run_args(prep, 0, kNcclId);
  a0["min_busbw_gbps"] = 200;
  const CommandOutcome rank0 = node0.run("collective_run", a0, "session");
  REQUIRE(rank0.ok);
  CHECK(rank0.result["status"] == "fail");
  CHECK(rank0.result["value"] == 123.5);
  CHECK(rank0.result["details"]["rank"] == 0);
  CHECK(rank0.result["details"]["reason"] ==
        "all-reduce bus bandwidth 123.50 GB/s at 1 MiB, expected at least 200.00 GB/s");
}

TEST_CASE("a kiln-gpucheck that gives no unique id fails prepare, then rank 0's check", "[session][nccl]") {
  kiln::test::TempTree t;
  t.script("kiln-gpucheck",
           "echo '{\"gpucheck\": {\"devices\": 0}, \"checks\": [{\"name\": \"nccl_multinode\", \"status\": \"fail\", "
           "\"value\": null, \"unit\": \"GB/s\", \"threshold\": null, \"details\": {\"reason\": "
           "\"expected 8 GPUs per node, found 0\"}}]}'\n");
  NodeCommands node0(node_options(t.path("kiln-gpucheck")), kQuiet);
  const json prep = {{"run", "n2"}, {"collective", "nccl"}, {"nodes", 2}, {"gpus_per_node", 8}, {"timeout_s", 30}};
  const CommandOutcome prepared = node0.run("collective_prepare", prep, "session");
  CHECK_FALSE(prepared.ok);
  CHECK(prepared.error ==
        "collective_prepare: kiln-gpucheck exited before giving a unique id: expected 8 GPUs per node, found 0");
  const CommandOutcome run = node0.run("collective_run", run_args(prep, 0, kNcclId), "session");
  REQUIRE(run.ok);
  CHECK(run.result["status"] == "fail");
  CHECK(run.result["value"].is_null());
  CHECK(run.result["details"]["ranks"] == 16);
  CHECK(run.result["details"]["reason"] ==
        "collective_prepare failed: kiln-gpucheck exited before giving a unique id: expected 8 GPUs per node, found 0");
}

TEST_CASE("without kiln-gpucheck, nccl prepare is an error and a peer's run a fail check", "[session][nccl]") {
  kiln::test::TempTree t;
  t.mkdir("agent");
  t.mkdir("bin");
  NodeCommandOptions o = node_options();
  o.plan.agent_dir = t.path("agent");
  o.plan.search_path = t.path("bin");
  NodeCommands node(o, kQuiet);
  const json prep = {{"run", "n3"}, {"collective", "nccl"}, {"nodes", 2}};
  const CommandOutcome prepared = node.run("collective_prepare", prep, "session");
  CHECK_FALSE(prepared.ok);
  CHECK(prepared.error == "collective_prepare: kiln-gpucheck not found next to kiln-agent (" + t.path("agent") +
                              ") or on PATH");
  const CommandOutcome peer = node.run("collective_run", run_args(prep, 1, kNcclId), "session");
  REQUIRE(peer.ok);
  CHECK(peer.result["status"] == "fail");
  CHECK(peer.result["value"].is_null());
  CHECK(peer.result["details"]["reason"].get<std::string>().rfind("kiln-gpucheck not found", 0) == 0);
}

TEST_CASE("a kiln-gpucheck that prints no report is a fail check with its stderr", "[session][nccl]") {
  kiln::test::TempTree t;
  t.script("kiln-gpucheck", "echo 'Segmentation fault (core dumped)' >&2\nexit 139\n");
  NodeCommands node(node_options(t.path("kiln-gpucheck")), kQuiet);
  const json prep = {{"run", "n4"}, {"collective", "nccl"}, {"nodes", 2}};
  const CommandOutcome peer = node.run("collective_run", run_args(prep, 1, kNcclId), "session");
  REQUIRE(peer.ok);
  CHECK(peer.result["status"] == "fail");
  CHECK(peer.result["details"]["reason"] ==
        "kiln-gpucheck printed no report (exit 139: Segmentation fault (core dumped))");
}
