// The rendezvous finding the bad member of a failed round (the "Failure"
// paragraph of controller/agent/collective_rendezvous.h): kilnd's real
// CollectiveRendezvous and broker on a SQLite store, and for each node a real
// NodeCommands (what kiln-agent runs) behind a thread that heartbeats and
// posts results as the agent loop does. The collectives are real: the tcp
// collective over loopback, or collective nccl with a stand-in kiln-gpucheck
// that makes every rank of a run report the slowest member's figure, as a
// real ring does.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "agent/runtime/commands.h"
#include "tests/unit/agent_broker/broker_harness.h"
#include "tests/unit/agent_checks/temp_tree.h"

#include "controller/agent/collective_rendezvous.h"

using namespace kiln;
using namespace kiln::testing;
using kiln::agent::CommandOutcome;
using kiln::agent::NodeCommandOptions;
using kiln::agent::NodeCommands;

namespace {

// "tcp:<ip>:<port>:<nonce>" with another port.
std::string with_port(const std::string& unique_id, int port) {
  const std::size_t a = unique_id.find(':', 4), b = unique_id.find(':', a + 1);
  return unique_id.substr(0, a + 1) + std::to_string(port) + unique_id.substr(b);
}

// One node's agent: the real commands, served from its own thread.
struct Member {
  std::string node;
  std::string session;
  std::unique_ptr<NodeCommands> commands;
  // Its collective traffic reaches nobody: as rank 0 it hands out an id
  // whose port nothing listens on, as a peer it dials such a port.
  bool unreachable = false;
  std::string prepared_id;  // the id its prepare really answered
  std::vector<std::pair<std::string, json>> seen;  // command name, args
  std::thread thread;
};

class Agents {
 public:
  explicit Agents(Harness& h) : h_(h) {}
  ~Agents() {
    stop_ = true;
    for (auto& e : members_)
      if (e.second->thread.joinable()) e.second->thread.join();
  }

  void add(const Node& n, const std::string& mac, const std::string& gpucheck = "") {
    auto r = h_.lookup(mac, h_.os_secret(n), "os");
    REQUIRE(r);
    auto m = std::make_unique<Member>();
    m->node = n.id;
    m->session = r->session;
    NodeCommandOptions o;
    o.api_url = "http://127.0.0.1:9/";  // the tcp root listens on the address towards it
    o.plan.gpucheck = gpucheck;
    o.power = [](kiln::agent::PowerAction) {};
    m->commands = std::make_unique<NodeCommands>(o, Logger(LogLevel::kOff));
    members_[n.id] = std::move(m);
  }
  Member& member(const std::string& node_id) { return *members_.at(node_id); }
  void start() {
    for (auto& e : members_) {
      Member* m = e.second.get();
      m->thread = std::thread([this, m] { serve(*m); });
    }
  }
  std::vector<json> runs_seen(const std::string& node_id) {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<json> out;
    for (const auto& c : members_.at(node_id)->seen)
      if (c.first == "collective_run") out.push_back(c.second);
    return out;
  }

 private:
  void serve(Member& m) {
    std::string last;
    while (!stop_) {
      auto hb = h_.heartbeat(m.session, m.node);
      if (!hb || !hb->command || hb->command->id == last) {
        std::this_thread::sleep_for(10ms);
        continue;
      }
      const AgentCommand c = *hb->command;
      last = c.id;
      {
        std::lock_guard<std::mutex> l(mu_);
        m.seen.emplace_back(c.name, c.args);
      }
      json args = c.args;
      if (m.unreachable && c.name == "collective_run") {
        if (args.value("rank", -1) == 0) args["unique_id"] = m.prepared_id;
        else args["unique_id"] = with_port(args["unique_id"].get<std::string>(), 1);
      }
      CommandOutcome out = m.commands->run(c.name, args, m.session);
      if (m.unreachable && c.name == "collective_prepare" && out.ok) {
        m.prepared_id = out.result["unique_id"].get<std::string>();
        out.result["unique_id"] = with_port(m.prepared_id, 1);
      }
      // A post may be refused (409) when kilnd stopped waiting: nothing to do then.
      (void)h_.post(m.session, m.node, c.id, out.ok ? "ok" : "error", out.result, out.error);
    }
  }

  Harness& h_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Member>> members_;
  std::atomic<bool> stop_{false};
};

Node allocated(Harness& h, const std::string& name, const std::string& mac, const std::string& allocation) {
  Node n = h.node(name, mac, S::kValidating);
  auto r = h.store().update_node_if(n.id, NodeCondition{},
                                    [&](Node& m) {
                                      m.allocation = allocation;
                                      return ok_status();
                                    },
                                    {});
  REQUIRE(r);
  return *r;
}

MultinodeRequest request(const Node& n, const json& profile) {
  MultinodeRequest r;
  r.node_id = n.id;
  r.allocation = n.allocation;
  r.profile = profile;
  return r;
}

CollectiveOptions options(const std::string& collective) {
  CollectiveOptions o;
  o.collective = collective;
  o.poll_interval = 20ms;
  o.assemble_timeout = 20s;
  o.prepare_timeout = 6s;
  o.run_timeout_s = 6;  // a pair round gets 2 s: plenty for 2 MiB over loopback
  o.max_mib = 2;
  o.iterations = 1;
  return o;
}

json tcp_profile() {
  return {{"name", "lab"}, {"gpu", {{"count", 0}}}, {"plans", {{"quick", {"nccl_multinode"}}}}};
}

json gpu_profile(double floor) {
  return {{"name", "hgx"},
          {"gpu", {{"count", 8}}},
          {"plans", {{"quick", {"nccl_multinode"}}}},
          {"thresholds", {{"nccl_multinode_busbw_gbps_min", floor}}}};
}

// A stand-in for kiln-gpucheck --multinode whose node reaches `busbw`: each
// rank leaves its figure under `dir`, keyed by the run's unique id, waits
// for the others, and reports the lowest, as every rank of a real ring does.
void write_gpucheck(const kiln::test::TempTree& t, const std::string& name, const std::string& dir, double busbw) {
  t.script(name,
           "rank=''; nodes=''; uid=''; prev=''\n"
           "for a in \"$@\"; do\n"
           "  [ \"$prev\" = --node-rank ] && rank=\"$a\"\n"
           "  [ \"$prev\" = --nodes ] && nodes=\"$a\"\n"
           "  [ \"$prev\" = --unique-id ] && uid=\"$a\"\n"
           "  prev=\"$a\"\n"
           "done\n"
           "if [ \"$rank\" = 0 ]; then\n"
           "  uid=\"nccl:$(head -c 128 /dev/urandom | od -An -v -tx1 | tr -d ' \\n')\"\n"
           "  echo \"{\\\"unique_id\\\": \\\"$uid\\\"}\"\n"
           "fi\n"
           "key=$(echo \"$uid\" | cut -c6-37)\n"
           "echo " + std::to_string(busbw) + " > '" + dir + "'/$key.$rank\n"
           "i=0\n"
           "while [ \"$(ls '" + dir + "' | grep -c \"^$key\\.\")\" -lt \"$nodes\" ] && [ $i -lt 500 ]; do\n"
           "  sleep 0.02; i=$((i+1))\n"
           "done\n"
           "busbw=$(cat '" + dir + "'/$key.* | sort -g | head -1)\n"
           "echo '{\"gpucheck\": {\"devices\": 8}, \"checks\": [{\"name\": \"nccl_multinode\", \"status\": \"pass\", "
           "\"value\": '$busbw', \"unit\": \"GB/s\", \"threshold\": null, \"details\": {\"collective\": \"nccl\", "
           "\"rank\": '$rank', \"nodes\": '$nodes', \"ranks\": 16, \"sizes\": [{\"bytes\": 2097152, \"time_us\": 10.0, "
           "\"algbw_gbps\": 100.0, \"busbw_gbps\": '$busbw'}], \"transport\": {}}}]}'\n");
}

// n members of one allocation, their checks once every run_check returned.
struct Allocation {
  std::vector<Node> nodes;  // in rank order (sorted by id)
  std::map<std::string, json> checks;
};

std::vector<Node> make_members(Harness& h, int n, const std::string& allocation, int mac_block) {
  std::vector<Node> nodes;
  for (int i = 0; i < n; ++i) {
    const std::string mac = "52:54:00:00:" + std::to_string(mac_block) + ":0" + std::to_string(i + 1);
    nodes.push_back(allocated(h, "m" + std::to_string(i), mac, allocation));
  }
  std::sort(nodes.begin(), nodes.end(), [](const Node& a, const Node& b) { return a.id < b.id; });
  return nodes;
}

std::string mac_of(const Node& n) { return n.ports.front().address; }

std::map<std::string, json> run_all(Harness& h, CollectiveRendezvous& rv, const std::vector<Node>& nodes,
                                    const json& profile) {
  std::vector<std::future<Result<json>>> futures;
  for (const Node& n : nodes) futures.push_back(h.spawn(rv.run_check(request(n, profile))));
  std::map<std::string, json> out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Result<json> r = futures[i].get();
    REQUIRE(r);
    out[nodes[i].id] = *r;
  }
  return out;
}

// Every member took part in at most the round of all plus one pair round a
// phase, and there were at most kIsolationPhases phases of at most n/2 pairs.
void check_bounds(Agents& agents, const std::vector<Node>& nodes, const std::map<std::string, json>& checks) {
  std::set<std::string> runs;
  for (const Node& n : nodes) {
    std::vector<json> seen = agents.runs_seen(n.id);
    CHECK(seen.size() <= static_cast<std::size_t>(1 + kIsolationPhases));
    for (const json& a : seen) runs.insert(a["run"].get<std::string>());
  }
  CHECK(runs.size() <= 1 + static_cast<std::size_t>(kIsolationPhases) * (nodes.size() / 2));
  for (const auto& c : checks) {
    if (!c.second["details"].contains("isolation") || !c.second["details"]["isolation"].is_object()) continue;
    for (const json& r : c.second["details"]["isolation"]["rounds"]) {
      CHECK(r["phase"].get<int>() <= kIsolationPhases);
      CHECK(r["members"].size() == 2);
    }
  }
}

}  // namespace

TEST_CASE("isolation, tcp: a member whose collective reaches nobody fails alone, the three others pass",
          "[isolation]") {
  Harness h;
  std::vector<Node> nodes = make_members(h, 4, "alloc", 40);
  Agents agents(h);
  for (const Node& n : nodes) agents.add(n, mac_of(n));
  const std::string bad = nodes[2].id;  // a peer in the round of all
  agents.member(bad).unreachable = true;
  agents.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), options("tcp"), Logger(LogLevel::kOff));

  std::map<std::string, json> checks = run_all(h, rv, nodes, tcp_profile());
  for (const Node& n : nodes) {
    const json& c = checks[n.id];
    INFO(n.id << ": " << c.dump());
    CHECK(c["details"]["members"].size() == 4);
    CHECK(c["details"]["isolation"]["at_fault"] == json::array({bad}));
    if (n.id == bad) {
      CHECK(c["status"] == "fail");
      CHECK(c["value"].is_null());  // hard: quarantined at once, not retried alone
      const std::string why = c["details"]["reason"];
      CHECK_THAT(why, Catch::Contains("pair rounds found this node at fault: the round of 4 members failed"));
      CHECK_THAT(why, Catch::Contains("with " + nodes[3].id));  // its first pair
      CHECK_THAT(why, Catch::Contains("first failure:"));
    } else {
      CHECK(c["status"] == "pass");
      CHECK(c["value"].get<double>() > 0);
      CHECK(c["details"]["collective"] == "tcp");
      CHECK(c["details"]["nodes"] == 2);  // a pair's figure
      CHECK(c["details"]["round_of_all"]["status"] == "fail");
    }
  }
  check_bounds(agents, nodes, checks);
}

TEST_CASE("isolation, tcp: three members with the bad one as rank 0 need all three pairs", "[isolation]") {
  Harness h;
  std::vector<Node> nodes = make_members(h, 3, "alloc", 41);
  Agents agents(h);
  for (const Node& n : nodes) agents.add(n, mac_of(n));
  const std::string bad = nodes[0].id;
  agents.member(bad).unreachable = true;
  agents.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), options("tcp"), Logger(LogLevel::kOff));

  std::map<std::string, json> checks = run_all(h, rv, nodes, tcp_profile());
  INFO(checks[bad].dump());
  CHECK(checks[bad]["status"] == "fail");
  CHECK_THAT(checks[bad]["details"]["reason"].get<std::string>(),
             Catch::Contains("(with " + nodes[1].id + ", with " + nodes[2].id + ")"));
  CHECK(checks[nodes[1].id]["status"] == "pass");
  CHECK(checks[nodes[2].id]["status"] == "pass");
  // (0,1) failed, (0,2) failed, then (1,2) passed: three phases, one pair each.
  const json& rounds = checks[bad]["details"]["isolation"]["rounds"];
  REQUIRE(rounds.size() == 3);
  CHECK(rounds[0]["members"] == json::array({nodes[0].id, nodes[1].id}));
  CHECK(rounds[1]["members"] == json::array({nodes[0].id, nodes[2].id}));
  CHECK(rounds[2]["members"] == json::array({nodes[1].id, nodes[2].id}));
  CHECK(rounds[2]["status"] == "pass");
  CHECK(agents.runs_seen(bad).size() == 3);  // the round of all and two pairs
  check_bounds(agents, nodes, checks);
}

TEST_CASE("isolation, nccl: a member with a low figure drags the round under the floor and is found", "[isolation]") {
  Harness h;
  kiln::test::TempTree t;
  t.mkdir("figures");
  std::vector<Node> nodes = make_members(h, 4, "alloc", 42);
  Agents agents(h);
  const std::string bad = nodes[1].id;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string script = "gpucheck-" + std::to_string(i);
    write_gpucheck(t, script, t.path("figures"), nodes[i].id == bad ? 250.0 : 360.0);
    agents.add(nodes[i], mac_of(nodes[i]), t.path(script));
  }
  agents.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), options("nccl"), Logger(LogLevel::kOff));

  std::map<std::string, json> checks = run_all(h, rv, nodes, gpu_profile(300));
  for (const Node& n : nodes) {
    const json& c = checks[n.id];
    INFO(n.id << ": " << c.dump());
    if (n.id == bad) {
      CHECK(c["status"] == "fail");
      CHECK(c["value"].is_null());
      CHECK(c["threshold"]["min"] == 300);
      // Its figures from the round of all and each pair, all 250.
      for (const auto& f : c["details"]["figures"].items()) CHECK(f.value() == 250.0);
      CHECK(c["details"]["figures"].size() == 3);
      CHECK_THAT(c["details"]["reason"].get<std::string>(), Catch::Contains("expected at least 300.00 GB/s"));
    } else {
      CHECK(c["status"] == "pass");
      CHECK(c["value"] == 360.0);  // measured without the bad member
    }
  }
  // Every check of the round of all had missed the floor: before isolation, all four failed.
  for (const Node& n : nodes) {
    const std::vector<json> seen = agents.runs_seen(n.id);
    REQUIRE(!seen.empty());
    CHECK(seen.front()["nodes"] == 4);
    CHECK(seen.front()["timeout_s"] == 6);
    if (seen.size() > 1) CHECK(seen[1]["timeout_s"] == 2);  // a pair round gets a third
  }
  check_bounds(agents, nodes, checks);
}

TEST_CASE("isolation, nccl: when every pair fails nobody is singled out and the rounds stop at the bound",
          "[isolation]") {
  Harness h;
  kiln::test::TempTree t;
  t.mkdir("figures");
  std::vector<Node> nodes = make_members(h, 4, "alloc", 43);
  Agents agents(h);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string script = "gpucheck-" + std::to_string(i);
    write_gpucheck(t, script, t.path("figures"), 250.0);  // the fabric, not one node
    agents.add(nodes[i], mac_of(nodes[i]), t.path(script));
  }
  agents.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), options("nccl"), Logger(LogLevel::kOff));

  std::map<std::string, json> checks = run_all(h, rv, nodes, gpu_profile(300));
  for (const Node& n : nodes) {
    const json& c = checks[n.id];
    INFO(c.dump());
    CHECK(c["status"] == "fail");
    CHECK(c["value"] == 250.0);  // its own check from the round of all: a numeric miss, retried as before
    CHECK_THAT(c["details"]["reason"].get<std::string>(), Catch::Contains("pair rounds found no member at fault"));
    CHECK(c["details"]["isolation"]["at_fault"].empty());
    // (0,1) (2,3), then (0,2) (1,3), then (0,3) (1,2): each member paired with each other once.
    CHECK(c["details"]["isolation"]["rounds"].size() == 6);
    CHECK(agents.runs_seen(n.id).size() == static_cast<std::size_t>(1 + kIsolationPhases));
  }
  check_bounds(agents, nodes, checks);
}

TEST_CASE("isolation: two members cannot be told apart, so both fail after one round", "[isolation]") {
  Harness h;
  kiln::test::TempTree t;
  t.mkdir("figures");
  std::vector<Node> nodes = make_members(h, 2, "alloc", 44);
  Agents agents(h);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string script = "gpucheck-" + std::to_string(i);
    write_gpucheck(t, script, t.path("figures"), i == 1 ? 250.0 : 360.0);
    agents.add(nodes[i], mac_of(nodes[i]), t.path(script));
  }
  agents.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), options("nccl"), Logger(LogLevel::kOff));

  std::map<std::string, json> checks = run_all(h, rv, nodes, gpu_profile(300));
  for (const Node& n : nodes) {
    const json& c = checks[n.id];
    INFO(c.dump());
    CHECK(c["status"] == "fail");
    CHECK(c["value"] == 250.0);
    CHECK(c["details"]["isolation"].is_string());
    CHECK(agents.runs_seen(n.id).size() == 1);
  }
}
