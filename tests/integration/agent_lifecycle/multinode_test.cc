// nccl_multinode with kilnd as the rendezvous, end to end without GPUs: two
// Redfish nodes (kiln-vbmc) deployed into one allocation; at wait_boot each
// node's "OS" is a real kiln-agent process (os phase, a fake /sys holding
// the node's MAC) on loopback. kilnd runs with --multinode-collective tcp,
// the test-only collective: rank 0's agent opens a TCP root and answers
// collective_prepare with its id, kilnd hands the id to the other agent, both
// all-reduce over loopback and verify the sums, and each report carries the
// check. Then the same allocation with an impossible floor: the numeric miss
// is retried once (a second round) and both nodes are quarantined; then an
// on-demand run re-checks one of them through the deploy ramdisk.
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "agent_lifecycle/agent_harness.h"
#include "tests/support/ip_addresses.h"
#include "tests/support/logged_child.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A fake root whose /sys/class/net/eth0 carries `mac` (the agent finds its
// node by MAC; a NIC needs a `device` to count as physical).
std::string fake_root(const std::string& dir, const std::string& mac) {
  const std::string net = dir + "/sys/class/net/eth0";
  std::filesystem::create_directories(net + "/device");
  write_file(net + "/address", mac + "\n");
  write_file(net + "/type", "1\n");
  return dir;
}

// The real OS-phase agents, started when a node's OS "boots".
class OsAgents {
 public:
  OsAgents(uint16_t kilnd_port, std::string dir) : port_(kilnd_port), dir_(std::move(dir)) {}
  void boot(const std::string& name, const std::string& mac, const std::string& os_secret) {
    std::lock_guard<std::mutex> l(mu_);
    const int n = ++boots_[name];
    const std::string root = fake_root(dir_ + "/root-" + name, mac);
    // What the ramdisk would have left on the disk (agent/deploy/agent_seed.h).
    const std::string seed = root + "/seed.env";
    write_file(seed, "KILN_OS_SECRET=" + os_secret + "\n");
    const std::string log = dir_ + "/agent-" + name + "-" + std::to_string(n) + ".log";
    agents_[name] = std::make_unique<LoggedChild>(
        std::vector<std::string>{KILN_AGENT_BIN, "run", "--api", "http://127.0.0.1:" + std::to_string(port_),
                                 "--phase", "os", "--root", root, "--seed-file", seed, "--log-level", "debug"},
        log);
  }
  int boots(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return boots_[name];
  }
  LoggedChild* agent(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return agents_.count(name) ? agents_[name].get() : nullptr;
  }
  std::string logs() {
    std::lock_guard<std::mutex> l(mu_);
    std::string out;
    for (auto& a : agents_) out += "--- " + a.first + "\n" + a.second->log();
    return out;
  }

 private:
  uint16_t port_;
  std::string dir_;
  std::mutex mu_;
  std::map<std::string, int> boots_;
  std::map<std::string, std::unique_ptr<LoggedChild>> agents_;
};

json lab_profile() {
  // Only jitter and nccl_multinode gate: the agent's other checks read the
  // test machine's real /sys and are shown, not judged.
  return {{"name", "mn-lab"},
          {"gpu", {{"count", 0}}},
          {"nvme", {{"devices", 0}}},
          {"jitter", {{"duration_s", 1}}},
          {"thresholds", {{"jitter_p999_us_max", 1e6}, {"nccl_multinode_busbw_gbps_min", 0.001}}},
          {"plans", {{"quick", {"jitter", "nccl_multinode"}}, {"full", {"jitter"}}}}};
}

// The newest pre-hand-off reports of a node, full (checks included).
std::vector<json> handoff_reports(HttpTestClient& c, const std::string& node) {
  json list = get(c, "/v1/nodes/" + node + "/validations?limit=50");
  std::vector<json> out;
  for (const json& v : list["validations"])
    if (v["phase"] == "pre_handoff") out.push_back(get(c, "/v1/validations/" + text(v["id"])));
  return out;
}

json check_named(const json& record, const std::string& name) {
  for (const json& ch : record["report"]["checks"])
    if (ch["name"] == name) return ch;
  return json();
}

}  // namespace

TEST_CASE("nccl_multinode: kilnd hands rank 0's id to the other agent, real agents all-reduce over TCP") {
  if (!fixtures_present()) {
    KILN_SKIP("skipping: " << kFixtures << " is absent");
  }
  VbmcProcess bmc_a({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                     kFixtures + "/supermicro-hgx-h100"});
  VbmcProcess bmc_b({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                     kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--multinode-collective",
                              "tcp", "--multinode-assemble-timeout", "120"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  register_images(c, dir.path(), os_bytes());
  auto r = c.request("POST", "/v1/profiles", lab_profile().dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);

  OsAgents os(k.port(), dir.path());
  const std::map<std::string, std::string> macs = {{"mn-a", "52:54:00:b0:00:01"}, {"mn-b", "52:54:00:b0:00:02"}};
  std::map<std::string, std::string> ids;
  std::vector<std::unique_ptr<TestAgent>> ramdisks;
  for (const auto& [name, mac] : macs) {
    json node = redfish_node(name, name == "mn-a" ? bmc_a.port() : bmc_b.port(), mac);
    node["profile"] = "mn-lab";
    r = c.request("POST", "/v1/nodes", node.dump(), auth());
    INFO(r.body);
    REQUIRE(r.status == 201);
    ids[name] = json::parse(r.body)["id"];
    AgentBehaviour b;
    b.os_boot = [&os, name = name, mac = mac](const std::string& secret) { os.boot(name, mac, secret); };
    k.lease_to_loopback(mac);
    ramdisks.push_back(std::make_unique<TestAgent>(k.port(), name, mac, b));
  }
  for (const auto& m : macs) to_available(c, m.first);

  // An allocation id is checked before anything moves.
  auto bad = c.request("PUT", "/v1/nodes/mn-a/states/provision",
                       json{{"target", "deploy"}, {"image", "demo-os"}, {"allocation", "no spaces!"}}.dump(), auth());
  CHECK(bad.status == 400);
  CHECK_THAT(bad.body, Catch::Contains("/allocation"));
  bad = c.request("PUT", "/v1/nodes/mn-a/states/provision",
                  json{{"target", "provide"}, {"allocation", "job-1"}}.dump(), auth());
  CHECK(bad.status == 400);
  CHECK_THAT(bad.body, Catch::Contains("only allowed with target deploy"));

  // 1. Both deployed into job-1: they meet, run the collective, and go active.
  for (const auto& m : macs)
    put(c, "/v1/nodes/" + m.first + "/states/provision", {{"target", "deploy"}, {"image", "demo-os"}, {"allocation", "job-1"}});
  for (const auto& m : macs) {
    json n = wait_node(c, m.first, [](const json& n) {
      return is_free(n) && (n["provision_state"] == "active" || n["provision_state"] == "quarantined");
    }, 180s);
    INFO(n.dump() << "\n" << os.logs());
    REQUIRE(n["provision_state"] == "active");
    CHECK(n["allocation"] == "job-1");
    // The real OS agents run on this machine: they reported its addresses
    // (ip(8) is the independent record), and the login is demo-os's root.
    const std::vector<std::string> want = kiln::test::ip_global_addresses().value_or(std::vector<std::string>{});
    INFO(n.dump());
    CHECK(n["addresses"].size() == want.size());
    for (const std::string& a : want) CHECK(std::find(n["addresses"].begin(), n["addresses"].end(), a) != n["addresses"].end());
    if (!want.empty()) CHECK(text(n["ssh"]).rfind("root@", 0) == 0);
  }
  json members = get(c, "/v1/nodes?allocation=job-1")["nodes"];
  CHECK(members.size() == 2);
  std::set<int> ranks;
  for (const auto& m : macs) {
    std::vector<json> reports = handoff_reports(c, m.first);
    REQUIRE(reports.size() == 1);
    json mn = check_named(reports[0], "nccl_multinode");
    INFO(reports[0].dump());
    REQUIRE(mn.is_object());
    CHECK(mn["status"] == "pass");
    CHECK(mn["value"].get<double>() > 0.001);
    CHECK(mn["threshold"]["min"] == 0.001);
    CHECK(mn["details"]["collective"] == "tcp");
    CHECK(mn["details"]["allocation"] == "job-1");
    CHECK(mn["details"]["nodes"] == 2);
    CHECK(mn["details"]["members"].size() == 2);
    CHECK(mn["details"]["sizes"].size() >= 1);
    ranks.insert(mn["details"]["rank"].get<int>());
    CHECK(reports[0]["result"] == "pass");
  }
  CHECK(ranks == std::set<int>{0, 1});
  // Handed over: each OS agent sees its lookup refused and stops by itself.
  for (const auto& m : macs) {
    LoggedChild* a = os.agent(m.first);
    REQUIRE(a != nullptr);
    INFO(a->log());
    CHECK(a->wait_exit(60s) == 0);
  }

  // 2. Undeploy clears the allocation; an impossible floor then fails both,
  // after one retry (a second round), and quarantines them.
  for (const auto& m : macs) put(c, "/v1/nodes/" + m.first + "/states/provision", {{"target", "undeploy"}});
  for (const auto& m : macs) {
    json n = wait_stable(c, m.first, "available", 120s);
    CHECK(n["allocation"].is_null());
  }
  r = c.request("PATCH", "/v1/profiles/mn-lab", json{{"thresholds", {{"nccl_multinode_busbw_gbps_min", 1e6}}}}.dump(),
                {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/merge-patch+json"}});
  INFO(r.body);
  REQUIRE(r.status == 200);
  for (const auto& m : macs)
    put(c, "/v1/nodes/" + m.first + "/states/provision", {{"target", "deploy"}, {"image", "demo-os"}, {"allocation", "job-2"}});
  for (const auto& m : macs) {
    json n = wait_node(c, m.first, [](const json& n) {
      return is_free(n) && (n["provision_state"] == "active" || n["provision_state"] == "quarantined");
    }, 180s);
    INFO(n.dump() << "\n" << os.logs());
    CHECK(n["provision_state"] == "quarantined");
    CHECK_THAT(text(n["last_error"]), Catch::Contains("nccl_multinode") && Catch::Contains("numeric miss on the retry"));
    std::vector<json> reports = handoff_reports(c, m.first);
    REQUIRE(reports.size() == 3);  // job-1's pass, then job-2's two attempts (newest first)
    for (int i = 0; i < 2; ++i) {
      json mn = check_named(reports[i], "nccl_multinode");
      CHECK(mn["status"] == "fail");
      CHECK(mn["value"].get<double>() > 0);  // measured, below the floor: a numeric miss
      CHECK(mn["details"]["allocation"] == "job-2");
    }
    CHECK(reports[0]["report"]["checks"].is_array());
    CHECK(check_named(reports[0], "nccl_multinode")["details"]["run"] !=
          check_named(reports[1], "nccl_multinode")["details"]["run"]);
  }

  // 3. After a repair an operator re-checks a quarantined node on demand: it
  // boots the deploy ramdisk (the test agent plays it), runs the plan, is
  // powered off, and stays quarantined until the operator acts.
  r = c.request("POST", "/v1/nodes/mn-a/validations", json{{"plan", "quick"}}.dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 202);
  json n = wait_node(c, "mn-a", [](const json& n) { return is_free(n); }, 60s);
  CHECK(n["provision_state"] == "quarantined");
  CHECK(n["power_state"] == "off");
  CHECK(text(n["provision_step"]).empty());
  json list = get(c, "/v1/nodes/mn-a/validations?limit=1");
  REQUIRE(list["validations"].size() == 1);
  json on_demand = get(c, "/v1/validations/" + text(list["validations"][0]["id"]));
  INFO(on_demand.dump());
  CHECK(on_demand["phase"] == "on_demand");
  CHECK(on_demand["result"] == "pass");
  CHECK(n["last_validation"] == on_demand["id"]);
  // Outside an allocation run, nccl_multinode is a skip, never a pass.
  CHECK(check_named(on_demand, "nccl_multinode")["status"] == "skip");
}
