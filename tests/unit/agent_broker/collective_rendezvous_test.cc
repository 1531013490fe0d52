// CollectiveRendezvous against the real broker and store, with in-process
// agents that answer collective_prepare / collective_run (scripted here; the
// real agents and the tcp collective are in tests/integration/multinode):
// who takes part, rank order, the unique id handed from rank 0 to the
// others, skips, failures, the assemble timeout, and losing the node.
#include <catch2/catch.hpp>

#include <map>
#include <mutex>
#include <set>

#include "controller/agent/collective_rendezvous.h"
#include "tests/unit/agent_broker/broker_harness.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

json tcp_profile(std::optional<double> floor = std::nullopt) {
  json p = {{"name", "lab"}, {"gpu", {{"count", 0}}}, {"plans", {{"quick", {"jitter", "nccl_multinode"}}}}};
  if (floor) p["thresholds"] = {{"nccl_multinode_busbw_gbps_min", *floor}};
  return p;
}

CollectiveOptions tcp_options() {
  CollectiveOptions o;
  o.collective = "tcp";
  o.poll_interval = 20ms;
  o.assemble_timeout = 20s;
  o.prepare_timeout = 5s;
  o.run_timeout_s = 5;
  return o;
}

// What one scripted agent saw and how it answers.
struct ScriptedAgent {
  std::string node;
  std::string session;
  std::vector<std::pair<std::string, json>> commands;  // name, args
  bool fail_prepare = false;
  double busbw = 12.5;
};

// Heartbeats for every agent until stopped; answers the collective commands.
class AgentFleet {
 public:
  explicit AgentFleet(Harness& h) : h_(h) {}
  ~AgentFleet() { stop(); }

  void add(const std::string& node_id, const std::string& mac) {
    Node n;
    n.id = node_id;
    auto r = h_.lookup(mac, h_.os_secret(n), "os");  // the deploy secret the disk carries
    REQUIRE(r);
    auto a = std::make_shared<ScriptedAgent>();
    a->node = node_id;
    a->session = r->session;
    std::lock_guard<std::mutex> l(mu_);
    agents_[node_id] = a;
  }
  std::shared_ptr<ScriptedAgent> agent(const std::string& node_id) {
    std::lock_guard<std::mutex> l(mu_);
    return agents_.at(node_id);
  }
  void start() {
    thread_ = std::thread([this] {
      while (!stop_) {
        std::vector<std::shared_ptr<ScriptedAgent>> all;
        {
          std::lock_guard<std::mutex> l(mu_);
          for (auto& e : agents_) all.push_back(e.second);
        }
        for (auto& a : all) serve(*a);
        std::this_thread::sleep_for(10ms);
      }
    });
  }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void serve(ScriptedAgent& a) {
    auto hb = h_.heartbeat(a.session, a.node);
    if (!hb || !hb->command) return;
    const AgentCommand& c = *hb->command;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!a.commands.empty() && a.commands.back().second.value("command_id", "") == c.id) return;
      json seen = c.args;
      seen["command_id"] = c.id;
      a.commands.emplace_back(c.name, seen);
    }
    // A post may be refused (409) when kilnd stopped waiting: nothing to do then.
    if (c.name == "collective_prepare") {
      if (a.fail_prepare) {
        (void)h_.post(a.session, a.node, c.id, "error", json::object(), "collective_prepare: kiln-gpucheck not found");
        return;
      }
      (void)h_.post(a.session, a.node, c.id, "ok", {{"run", c.args["run"]}, {"unique_id", "tcp:127.0.0.1:1:" + a.node}});
      return;
    }
    if (c.name == "collective_run") {
      json check = {{"name", "nccl_multinode"},
                    {"status", "pass"},
                    {"value", a.busbw},
                    {"unit", "GB/s"},
                    {"threshold", nullptr},
                    {"details", {{"collective", "tcp"}, {"rank", c.args["rank"]}, {"nodes", c.args["nodes"]}}}};
      const json& floor = c.args["min_busbw_gbps"];
      if (floor.is_number()) {
        check["threshold"] = {{"min", floor}};
        if (a.busbw < floor.get<double>()) check["status"] = "fail";
      }
      (void)h_.post(a.session, a.node, c.id, "ok", check);
      return;
    }
    (void)h_.post(a.session, a.node, c.id, "error", json::object(), "unexpected command " + c.name);
  }

  Harness& h_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<ScriptedAgent>> agents_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

Node allocated(Harness& h, const std::string& name, const std::string& mac, S state, const std::string& allocation) {
  Node n = h.node(name, mac, state);
  auto r = h.store().update_node_if(n.id, NodeCondition{},
                                    [&](Node& m) {
                                      m.allocation = allocation;
                                      return ok_status();
                                    },
                                    {});
  REQUIRE(r);
  return *r;
}

MultinodeRequest request(const Node& n, const json& profile, StillHeld held = StillHeld()) {
  MultinodeRequest r;
  r.node_id = n.id;
  r.allocation = n.allocation;
  r.profile = profile;
  r.still_held = std::move(held);
  return r;
}

std::vector<std::string> names_of(const ScriptedAgent& a) {
  std::vector<std::string> out;
  for (const auto& c : a.commands) out.push_back(c.first);
  return out;
}

}  // namespace

TEST_CASE("rendezvous: which profiles want nccl_multinode") {
  CHECK(CollectiveRendezvous::wanted(tcp_profile()));
  CHECK(CollectiveRendezvous::wanted(json{{"thresholds", {{"nccl_multinode_busbw_gbps_min", 300}}}}));
  CHECK_FALSE(CollectiveRendezvous::wanted(json{{"plans", {{"quick", {"jitter"}}}}}));
  CHECK_FALSE(CollectiveRendezvous::wanted(json{{"thresholds", {{"nccl_busbw_gbps_min", 400}}}}));
  CHECK_FALSE(CollectiveRendezvous::wanted(json()));
}

TEST_CASE("rendezvous: two nodes of an allocation, rank 0 prepares, both run with its unique id") {
  Harness h;
  Node a = allocated(h, "a", "52:54:00:00:10:01", S::kValidating, "alloc-1");
  Node b = allocated(h, "b", "52:54:00:00:10:02", S::kValidating, "alloc-1");
  Node other = allocated(h, "c", "52:54:00:00:10:03", S::kValidating, "alloc-2");  // not a member
  (void)other;
  AgentFleet fleet(h);
  fleet.add(a.id, "52:54:00:00:10:01");
  fleet.add(b.id, "52:54:00:00:10:02");
  fleet.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), tcp_options(), Logger(LogLevel::kOff));

  auto fa = h.spawn(rv.run_check(request(a, tcp_profile(10.0))));
  std::this_thread::sleep_for(200ms);  // a waits alone: b has not joined
  CHECK(fa.wait_for(0ms) == std::future_status::timeout);
  auto fb = h.spawn(rv.run_check(request(b, tcp_profile(10.0))));
  Result<json> ra = fa.get(), rb = fb.get();
  REQUIRE(ra);
  REQUIRE(rb);
  INFO(ra->dump() << "\n" << rb->dump());
  CHECK((*ra)["status"] == "pass");
  CHECK((*rb)["status"] == "pass");
  CHECK((*ra)["threshold"]["min"] == 10.0);

  const std::string root = std::min(a.id, b.id), peer = std::max(a.id, b.id);
  auto root_agent = fleet.agent(root), peer_agent = fleet.agent(peer);
  CHECK(names_of(*root_agent) == std::vector<std::string>{"collective_prepare", "collective_run"});
  CHECK(names_of(*peer_agent) == std::vector<std::string>{"collective_run"});
  const json& prep = root_agent->commands[0].second;
  const json& run0 = root_agent->commands[1].second;
  const json& run1 = peer_agent->commands[0].second;
  CHECK(prep["collective"] == "tcp");
  CHECK(prep["nodes"] == 2);
  CHECK(prep["max_mib"] == 8);
  CHECK(run0["rank"] == 0);
  CHECK(run1["rank"] == 1);
  CHECK(run0["run"] == prep["run"]);
  CHECK(run1["run"] == prep["run"]);
  CHECK(run1["unique_id"] == "tcp:127.0.0.1:1:" + root);  // rank 0's id handed to the peer
  CHECK(run1["min_busbw_gbps"] == 10.0);
  CHECK((*ra)["details"]["allocation"] == "alloc-1");
  CHECK((*ra)["details"]["members"] == json::array({root, peer}));
}

TEST_CASE("rendezvous: after a numeric miss both members retry and meet again in a new round") {
  Harness h;
  Node a = allocated(h, "a", "52:54:00:00:16:01", S::kValidating, "alloc");
  Node b = allocated(h, "b", "52:54:00:00:16:02", S::kValidating, "alloc");
  AgentFleet fleet(h);
  fleet.add(a.id, "52:54:00:00:16:01");
  fleet.add(b.id, "52:54:00:00:16:02");
  fleet.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), tcp_options(), Logger(LogLevel::kOff));
  auto fa = h.spawn(rv.run_check(request(a, tcp_profile(100.0))));  // 12.5 GB/s < 100: a miss
  auto fb = h.spawn(rv.run_check(request(b, tcp_profile(100.0))));
  Result<json> ra = fa.get(), rb = fb.get();
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK((*ra)["status"] == "fail");
  CHECK((*rb)["status"] == "fail");

  // a comes back first; it must wait for b (whose round failed) rather than run alone.
  auto fa2 = h.spawn(rv.run_check(request(a, tcp_profile(100.0))));
  std::this_thread::sleep_for(200ms);
  CHECK(fa2.wait_for(0ms) == std::future_status::timeout);
  auto fb2 = h.spawn(rv.run_check(request(b, tcp_profile(100.0))));
  ra = fa2.get();
  rb = fb2.get();
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK((*ra)["details"]["members"].size() == 2);
  const std::string root = std::min(a.id, b.id);
  auto cmds = fleet.agent(root)->commands;
  REQUIRE(cmds.size() == 4);
  CHECK(cmds[2].first == "collective_prepare");
  CHECK(cmds[2].second["run"] != cmds[0].second["run"]);
}

TEST_CASE("rendezvous: a member still deploying is waited for, one that failed is not") {
  Harness h;
  Node a = allocated(h, "a", "52:54:00:00:11:01", S::kValidating, "alloc");
  Node b = allocated(h, "b", "52:54:00:00:11:02", S::kDeploying, "alloc");
  AgentFleet fleet(h);
  fleet.add(a.id, "52:54:00:00:11:01");
  fleet.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), tcp_options(), Logger(LogLevel::kOff));
  auto fa = h.spawn(rv.run_check(request(a, tcp_profile())));
  std::this_thread::sleep_for(300ms);
  CHECK(fa.wait_for(0ms) == std::future_status::timeout);
  h.move(b.id, S::kDeployFailed);  // b drops out: a runs alone, which is a skip
  Result<json> ra = fa.get();
  REQUIRE(ra);
  CHECK((*ra)["status"] == "skip");
  CHECK((*ra)["details"]["reason"].get<std::string>().find("only this node of allocation alloc") != std::string::npos);
  CHECK(fleet.agent(a.id)->commands.empty());  // nothing was sent to the agent
}

TEST_CASE("rendezvous: skips without an allocation, and for nccl on a profile without GPUs") {
  Harness h;
  Node a = allocated(h, "a", "52:54:00:00:12:01", S::kValidating, "");
  CollectiveRendezvous tcp(h.broker(), h.store(), h.db(), tcp_options(), Logger(LogLevel::kOff));
  Result<json> r = h.sync(tcp.run_check(request(a, tcp_profile())));
  REQUIRE(r);
  CHECK((*r)["status"] == "skip");
  CHECK((*r)["details"]["reason"] == "the node is not deployed in an allocation");

  Node b = allocated(h, "b", "52:54:00:00:12:02", S::kValidating, "x");
  CollectiveOptions o = tcp_options();
  o.collective = "nccl";
  CollectiveRendezvous nccl(h.broker(), h.store(), h.db(), o, Logger(LogLevel::kOff));
  r = h.sync(nccl.run_check(request(b, tcp_profile())));
  REQUIRE(r);
  CHECK((*r)["status"] == "skip");
  CHECK((*r)["details"]["reason"].get<std::string>().find("expects no GPUs") != std::string::npos);
}

TEST_CASE("rendezvous: rank 0 failing to prepare fails every member with the reason") {
  Harness h;
  Node a = allocated(h, "a", "52:54:00:00:13:01", S::kValidating, "alloc");
  Node b = allocated(h, "b", "52:54:00:00:13:02", S::kValidating, "alloc");
  AgentFleet fleet(h);
  fleet.add(a.id, "52:54:00:00:13:01");
  fleet.add(b.id, "52:54:00:00:13:02");
  const std::string root = std::min(a.id, b.id);
  fleet.agent(root)->fail_prepare = true;
  fleet.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), tcp_options(), Logger(LogLevel::kOff));
  auto fa = h.spawn(rv.run_check(request(a, tcp_profile(5.0))));
  auto fb = h.spawn(rv.run_check(request(b, tcp_profile(5.0))));
  Result<json> ra = fa.get(), rb = fb.get();
  REQUIRE(ra);
  REQUIRE(rb);
  for (const json* r : {&*ra, &*rb}) {
    INFO(r->dump());
    CHECK((*r)["status"] == "fail");
    CHECK((*r)["value"].is_null());
    CHECK((*r)["threshold"]["min"] == 5.0);
    const std::string why = (*r)["details"]["reason"];
    CHECK(why.find("rank 0 (node " + root + ") could not start the collective") != std::string::npos);
    CHECK(why.find("kiln-gpucheck not found") != std::string::npos);
  }
}

TEST_CASE("rendezvous: after the assemble timeout the round runs with the members present") {
  Harness h;
  Node a = allocated(h, "a", "52:54:00:00:14:01", S::kValidating, "alloc");
  Node b = allocated(h, "b", "52:54:00:00:14:02", S::kValidating, "alloc");
  Node late = allocated(h, "z", "52:54:00:00:14:03", S::kDeploying, "alloc");
  AgentFleet fleet(h);
  fleet.add(a.id, "52:54:00:00:14:01");
  fleet.add(b.id, "52:54:00:00:14:02");
  fleet.start();
  CollectiveOptions o = tcp_options();
  o.assemble_timeout = 500ms;
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), o, Logger(LogLevel::kOff));
  auto fa = h.spawn(rv.run_check(request(a, tcp_profile())));
  auto fb = h.spawn(rv.run_check(request(b, tcp_profile())));
  Result<json> ra = fa.get(), rb = fb.get();
  REQUIRE(ra);
  REQUIRE(rb);
  CHECK((*ra)["status"] == "pass");
  CHECK((*ra)["details"]["absent"] == json::array({late.id}));
  CHECK((*ra)["details"]["members"].size() == 2);
}

TEST_CASE("rendezvous: losing the node while waiting is kConflict and leaves the round") {
  Harness h;
  Node a = allocated(h, "a", "52:54:00:00:15:01", S::kValidating, "alloc");
  Node b = allocated(h, "b", "52:54:00:00:15:02", S::kValidating, "alloc");
  (void)b;
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), tcp_options(), Logger(LogLevel::kOff));
  auto held = std::make_shared<std::atomic<bool>>(true);
  auto fa = h.spawn(rv.run_check(request(a, tcp_profile(), flag_check(held))));
  std::this_thread::sleep_for(100ms);
  held->store(false);
  Result<json> ra = fa.get();
  REQUIRE_FALSE(ra);
  CHECK(ra.error().code == Code::kConflict);

  // Shutdown ends a wait too.
  auto fb = h.spawn(rv.run_check(request(b, tcp_profile())));
  std::this_thread::sleep_for(100ms);
  rv.shutdown();
  Result<json> rb = fb.get();
  REQUIRE_FALSE(rb);
  CHECK(rb.error().code == Code::kUnavailable);
}

TEST_CASE("rendezvous: of three members, the one whose agent reports a low figure is found by pair rounds") {
  Harness h;
  std::vector<Node> nodes = {allocated(h, "a", "52:54:00:00:17:01", S::kValidating, "alloc"),
                             allocated(h, "b", "52:54:00:00:17:02", S::kValidating, "alloc"),
                             allocated(h, "c", "52:54:00:00:17:03", S::kValidating, "alloc")};
  std::sort(nodes.begin(), nodes.end(), [](const Node& x, const Node& y) { return x.id < y.id; });
  AgentFleet fleet(h);
  for (const Node& n : nodes) fleet.add(n.id, n.ports.front().address);
  const std::string low = nodes[2].id;
  fleet.agent(low)->busbw = 1.0;
  fleet.start();
  CollectiveRendezvous rv(h.broker(), h.store(), h.db(), tcp_options(), Logger(LogLevel::kOff));
  std::vector<std::future<Result<json>>> futures;
  for (const Node& n : nodes) futures.push_back(h.spawn(rv.run_check(request(n, tcp_profile(10.0)))));
  std::map<std::string, json> checks;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Result<json> r = futures[i].get();
    REQUIRE(r);
    checks[nodes[i].id] = *r;
  }
  INFO(checks[low].dump());
  CHECK(checks[low]["status"] == "fail");
  CHECK(checks[low]["value"].is_null());
  CHECK_THAT(checks[low]["details"]["reason"].get<std::string>(),
             Catch::Contains("pair rounds found this node at fault: the round of 3 members failed, and so did every "
                             "pair round it ran (with " + nodes[0].id + ")"));
  CHECK(checks[low]["details"]["figures"].size() == 2);  // the round of all and its pair, both 1.0
  for (const std::string& id : {nodes[0].id, nodes[1].id}) {
    INFO(checks[id].dump());
    CHECK(checks[id]["status"] == "pass");
    CHECK(checks[id]["value"] == 12.5);
    CHECK(checks[id]["details"]["isolation"]["at_fault"] == json::array({low}));
  }
  // The round of all, then (a, b) while c waits, then (a, c): a pair round gets a third of the run timeout.
  auto runs = [&](const std::string& id) {
    std::vector<json> out;
    for (const auto& c : fleet.agent(id)->commands)
      if (c.first == "collective_run") out.push_back(c.second);
    return out;
  };
  CHECK(runs(nodes[0].id).size() == 3);
  CHECK(runs(nodes[1].id).size() == 2);
  CHECK(runs(low).size() == 2);
  CHECK(runs(low)[1]["nodes"] == 2);
  CHECK(runs(low)[1]["timeout_s"] == 1);  // 5 s / 3
}
