// The lifecycle engine against a real SQLite store and the fake driver:
// every workflow, the lock, abort, timeouts, injected failures, restart recovery.
#include <catch2/catch.hpp>

#include <fstream>

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/conductor/conductor.h"
#include "controller/store/store.h"
#include "drivers/fake/fake_driver.h"
#include "tests/support/wait_until.h"

using namespace kiln;
using namespace std::chrono_literals;
using S = ProvisionState;

namespace {

class Harness {
 public:
  explicit Harness(ConductorOptions opt = fast_options(), std::string dir = "")
      : dir_(dir.empty() ? make_dir() : dir), work_(asio::make_work_guard(io_)), db_(2),
        box_(SecretBox::Key{1, 2, 3}) {
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
    REQUIRE(s);
    store_ = std::move(*s);
    REQUIRE(store_->migrate());
    drivers_.add(make_fake_driver(io_.get_executor()));
    conductor_ = std::make_unique<Conductor>(io_, *store_, db_, drivers_, box_, clock_, opt, Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Harness() {
    conductor_->stop();
    work_.reset();
    io_.stop();
    thread_.join();
    db_.stop();
    if (owns_dir_) std::filesystem::remove_all(dir_);
  }

  static ConductorOptions fast_options() {
    ConductorOptions o;
    o.default_timeout = 30s;
    o.timeout_check_interval = 20ms;
    return o;
  }
  static std::string make_dir() {
    char tmpl[] = "/tmp/kiln-conductor-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    return tmpl;
  }

  template <typename T>
  T sync(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future).get();
  }

  Status start() { return sync(conductor_->start()); }

  Node enroll(const std::string& name, nlohmann::json options = nlohmann::json::object(),
              const std::string& driver = "fake") {
    Node n;
    n.name = name;
    n.bmc.driver = driver;
    n.bmc.address = "bmc-" + name;
    n.bmc.username = "admin";
    n.bmc.password_sealed = box_.seal("pw-" + name);
    n.bmc.options = std::move(options);
    static std::atomic<int> next_mac{1};
    int m = next_mac++;
    char mac[32];
    std::snprintf(mac, sizeof mac, "52:54:00:%02x:%02x:01", (m >> 8) & 0xff, m & 0xff);
    Port p;
    p.address = mac;
    n.ports.push_back(p);
    auto r = store_->create_node(n, EventDraft{.type = "node.created"});
    REQUIRE(r);
    return *r;
  }

  Result<Node> verb(const std::string& node, ProvisionEvent v, ProvisionArgs args = {}) {
    return sync(conductor_->provision(node, v, args, Actor{"t1", "tester", "admin", "req-1"}));
  }
  Result<Node> power(const std::string& node, PowerAction a) {
    return sync(conductor_->power(node, a, Actor{"t1", "tester", "admin", "req-2"}));
  }

  Node get(const std::string& node) {
    auto r = store_->get_node(node);
    REQUIRE(r);
    return *r;
  }

  // Polls until the node is in `state` and no operation holds it.
  Node wait_stable(const std::string& node, S state, std::chrono::milliseconds limit = 5s) {
    auto end = std::chrono::steady_clock::now() + limit;
    Node n;
    while (std::chrono::steady_clock::now() < end) {
      n = get(node);
      if (n.provision_state == state && n.reservation.empty()) return n;
      std::this_thread::sleep_for(5ms);
    }
    FAIL("node " << node << " did not reach " << to_string(state) << "; it is " << to_string(n.provision_state)
                 << " step=" << n.provision_step << " last_error=" << n.last_error);
    return n;
  }

  Node wait_step(const std::string& node, const std::string& step, std::chrono::milliseconds limit = 5s) {
    auto end = std::chrono::steady_clock::now() + limit;
    Node n;
    while (std::chrono::steady_clock::now() < end) {
      n = get(node);
      if (n.provision_step == step) return n;
      std::this_thread::sleep_for(2ms);
    }
    FAIL("node " << node << " never reached step " << step << "; at " << n.provision_step);
    return n;
  }

  std::vector<EventRecord> events(const std::string& node_id) {
    auto r = store_->list_events(0, 1000, node_id, std::nullopt);
    REQUIRE(r);
    return *r;
  }

  NodeStore& store() { return *store_; }
  Conductor& conductor() { return *conductor_; }
  // Before start(): the registry is read-only once verbs run.
  void add_driver(std::unique_ptr<Driver> d) { drivers_.add(std::move(d)); }
  asio::any_io_executor executor() { return io_.get_executor(); }
  const std::string& dir() const { return dir_; }
  void keep_dir() { owns_dir_ = false; }

 private:
  std::string dir_;
  bool owns_dir_ = true;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool db_;
  SecretBox box_;
  SystemClock clock_;
  std::unique_ptr<NodeStore> store_;
  DriverRegistry drivers_;
  std::unique_ptr<Conductor> conductor_;
  std::thread thread_;
};

std::vector<std::string> transitions(const std::vector<EventRecord>& evs) {
  std::vector<std::string> out;
  for (const auto& e : evs)
    if (e.type == "provision.transition") out.push_back(e.from_state + ">" + e.to_state);
  return out;
}

// An agent that is always there; counts what it was asked.
struct CountingAgent : AgentInterface {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  asio::awaitable<Status> forget(const DriverTarget&) override {
    ++*calls;
    co_return ok_status();
  }
  asio::awaitable<Status> wait_for_agent(const DriverTarget&, AgentPhase) override {
    ++*calls;
    co_return ok_status();
  }
};

}  // namespace

TEST_CASE("manage verifies the BMC and reads the power state") {
  Harness h;
  REQUIRE(h.start());
  Node n = h.enroll("n1");
  auto r = h.verb("n1", ProvisionEvent::kManage);
  REQUIRE(r);
  CHECK(r->provision_state == S::kVerifying);
  CHECK(r->target_provision_state == S::kManageable);
  CHECK_FALSE(r->reservation.empty());
  CHECK(r->deadline_at > 0);
  Node m = h.wait_stable("n1", S::kManageable);
  CHECK(m.power_state == PowerState::kOff);
  CHECK(m.deadline_at == 0);
  CHECK_FALSE(m.target_provision_state.has_value());
  CHECK(m.last_error.empty());
  CHECK(transitions(h.events(n.id)) == std::vector<std::string>{"enroll>verifying", "verifying>manageable"});
  // The operation is counted just after the write that makes the node
  // stable, so a reader can see the node first: wait for the count.
  CHECK(kiln::testing::wait_until(
      [&] {
        auto counts = h.conductor().operation_counts();
        return counts[{"manage", "success"}] == 1;
      },
      std::chrono::seconds(5)));
}

TEST_CASE("fake driver: hold_until_file holds a step until the file exists, and must be an absolute path") {
  Harness h;
  REQUIRE(h.start());
  char tmpl[] = "/tmp/kiln-hold-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string gate = std::string(tmpl) + "/go";
  h.enroll("held", {{"hold_until_file", gate}});
  REQUIRE(h.verb("held", ProvisionEvent::kManage));
  std::this_thread::sleep_for(300ms);
  CHECK(h.get("held").provision_state == S::kVerifying);  // still in its step
  { std::ofstream(gate) << "go"; }
  h.wait_stable("held", S::kManageable);
  std::filesystem::remove_all(tmpl);

  BmcInfo bmc;
  bmc.driver = "fake";
  bmc.address = "x";
  bmc.options = {{"hold_until_file", "relative/go"}};
  Status bad = h.conductor().validate_bmc(bmc);
  REQUIRE_FALSE(bad);
  REQUIRE(bad.error().fields.size() == 1);
  CHECK(bad.error().fields[0].field == "/bmc/options/hold_until_file");
}

TEST_CASE("the whole lifecycle: inspect, provide, deploy, undeploy") {
  Harness h;
  REQUIRE(h.start());
  Node n = h.enroll("life");
  REQUIRE(h.verb("life", ProvisionEvent::kManage));
  h.wait_stable("life", S::kManageable);

  REQUIRE(h.verb("life", ProvisionEvent::kInspect));
  Node i = h.wait_stable("life", S::kManageable);
  REQUIRE(i.inventory.is_object());
  CHECK(i.inventory["nics"][0]["mac"] == n.ports[0].address);

  REQUIRE(h.verb("life", ProvisionEvent::kProvide));
  Node a = h.wait_stable("life", S::kAvailable);
  CHECK(a.power_state == PowerState::kOff);

  auto d = h.verb("life", ProvisionEvent::kDeploy, ProvisionArgs{"demo-os"});
  REQUIRE(d);
  CHECK(d->image == "demo-os");
  Node act = h.wait_stable("life", S::kActive);
  CHECK(act.power_state == PowerState::kOn);

  REQUIRE(h.verb("life", ProvisionEvent::kUndeploy));
  h.wait_stable("life", S::kAvailable);

  CHECK(transitions(h.events(n.id)) ==
        std::vector<std::string>{"enroll>verifying", "verifying>manageable", "manageable>inspecting",
                                 "inspecting>manageable", "manageable>cleaning", "cleaning>burning_in",
                                 "burning_in>available", "available>deploying", "deploying>validating",
                                 "validating>active", "active>cleaning", "cleaning>burning_in",
                                 "burning_in>available"});
  // Every step a flow ran is an event too, in order, on the node's stream.
  std::vector<std::string> steps;
  for (const auto& e : h.events(n.id))
    if (e.type == "provision.step") steps.push_back(e.detail.value("step", ""));
  CHECK(std::find(steps.begin(), steps.end(), "write_image") != steps.end());
  CHECK(std::find(steps.begin(), steps.end(), "validate") != steps.end());
  CHECK(std::find(steps.begin(), steps.end(), "write_image") < std::find(steps.begin(), steps.end(), "validate"));
}

TEST_CASE("a verb not allowed in the state is refused naming the state") {
  Harness h;
  REQUIRE(h.start());
  h.enroll("n2");
  auto r = h.verb("n2", ProvisionEvent::kDeploy);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kConflict);
  CHECK_THAT(r.error().message, Catch::Contains("state enroll") && Catch::Contains("allowed: manage"));
  CHECK(h.get("n2").provision_state == S::kEnroll);
  auto missing = h.verb("nope", ProvisionEvent::kManage);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Code::kNotFound);
}

TEST_CASE("one operation per node: a second verb while busy is refused") {
  Harness h;
  REQUIRE(h.start());
  h.enroll("busy", {{"power_delay_ms", 300}});
  REQUIRE(h.verb("busy", ProvisionEvent::kManage));
  h.wait_stable("busy", S::kManageable);
  REQUIRE(h.verb("busy", ProvisionEvent::kProvide));
  auto second = h.verb("busy", ProvisionEvent::kInspect);
  REQUIRE_FALSE(second);
  CHECK(second.error().code == Code::kConflict);
  auto p = h.power("busy", PowerAction::kOn);
  REQUIRE_FALSE(p);
  CHECK_THAT(p.error().message, Catch::Contains("busy"));
  h.wait_stable("busy", S::kAvailable);
}

TEST_CASE("concurrent verbs on one node: exactly one wins") {
  Harness h;
  REQUIRE(h.start());
  h.enroll("race");
  std::vector<std::future<Result<Node>>> fs;
  for (int i = 0; i < 8; ++i)
    fs.push_back(std::async(std::launch::async, [&] { return h.verb("race", ProvisionEvent::kManage); }));
  int wins = 0;
  for (auto& f : fs) wins += f.get().ok() ? 1 : 0;
  CHECK(wins == 1);
  h.wait_stable("race", S::kManageable);
}

TEST_CASE("abort in a wait step fails the node and releases the lock") {
  Harness h;
  REQUIRE(h.start());
  h.enroll("ab");
  REQUIRE(h.verb("ab", ProvisionEvent::kManage));
  h.wait_stable("ab", S::kManageable);
  REQUIRE(h.store().update_node_if("ab", {}, [](Node& n) {
    n.bmc.options = {{"step_delay_ms", 60000}};
    return ok_status();
  }, {}));
  REQUIRE(h.verb("ab", ProvisionEvent::kProvide));
  REQUIRE(h.verb("ab", ProvisionEvent::kProvide).error().code == Code::kConflict);
  h.wait_step("ab", "clean");
  auto a = h.verb("ab", ProvisionEvent::kAbort);
  REQUIRE(a);
  CHECK(a->provision_state == S::kCleanFailed);
  CHECK(a->reservation.empty());
  CHECK_THAT(a->last_error, Catch::Contains("aborted by tester in cleaning (step clean)"));
  // The node is free again: manage works at once.
  REQUIRE(h.verb("ab", ProvisionEvent::kManage));
  CHECK(h.get("ab").provision_state == S::kManageable);
  // Abort in a stable state is refused.
  auto again = h.verb("ab", ProvisionEvent::kAbort);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == Code::kConflict);
}

TEST_CASE("a step past its deadline fails the node with the reason") {
  ConductorOptions o = Harness::fast_options();
  o.timeouts[S::kDeploying] = 300ms;
  Harness h(o);
  REQUIRE(h.start());
  h.enroll("slow");
  REQUIRE(h.verb("slow", ProvisionEvent::kManage));
  h.wait_stable("slow", S::kManageable);
  REQUIRE(h.verb("slow", ProvisionEvent::kProvide));
  h.wait_stable("slow", S::kAvailable);
  // Make deploy hang: the driver reads options at each call.
  REQUIRE(h.store().update_node_if("slow", {}, [](Node& n) {
    n.bmc.options = {{"step_delay_ms", 60000}};
    return ok_status();
  }, {}));
  REQUIRE(h.verb("slow", ProvisionEvent::kDeploy, ProvisionArgs{"img"}));
  Node f = h.wait_stable("slow", S::kDeployFailed, 5s);
  CHECK_THAT(f.last_error, Catch::Contains("timed out after 0.3s in deploying (step write_image)"));
  CHECK(f.deadline_at == 0);
  CHECK_FALSE(f.target_provision_state.has_value());
}

TEST_CASE("injected driver failures land in the failed state with last_error") {
  Harness h;
  REQUIRE(h.start());
  SECTION("verify fails: back to enroll") {
    h.enroll("v", {{"fail", {"verify"}}});
    REQUIRE(h.verb("v", ProvisionEvent::kManage));
    Node n = h.wait_stable("v", S::kEnroll);
    CHECK_THAT(n.last_error, Catch::Contains("injected failure in verify"));
  }
  SECTION("clean fails: clean_failed") {
    h.enroll("c", {{"fail", {"clean"}}});
    REQUIRE(h.verb("c", ProvisionEvent::kManage));
    h.wait_stable("c", S::kManageable);
    REQUIRE(h.verb("c", ProvisionEvent::kProvide));
    Node n = h.wait_stable("c", S::kCleanFailed);
    CHECK_THAT(n.last_error, Catch::Contains("injected failure in clean"));
    // An operator can take it back.
    REQUIRE(h.verb("c", ProvisionEvent::kManage));
    CHECK(h.get("c").provision_state == S::kManageable);
  }
  SECTION("validation fails: quarantined with the failing check") {
    // Only a node with a profile is validated (without one, burn-in is skipped).
    REQUIRE(h.store().create_profile(Profile{.name = "p"}));
    h.enroll("q", {{"validation", "fail"}});
    REQUIRE(h.store().update_node_if("q", {}, [](Node& m) {
      m.profile = "p";
      return ok_status();
    }, {}));
    REQUIRE(h.verb("q", ProvisionEvent::kManage));
    h.wait_stable("q", S::kManageable);
    REQUIRE(h.verb("q", ProvisionEvent::kProvide));
    Node n = h.wait_stable("q", S::kQuarantined);
    CHECK_THAT(n.last_error, Catch::Contains("validation (full, attempt 1) failed: fake_check"));
  }
  SECTION("a driver this build lacks: manage fails with the reason") {
    h.enroll("r", {}, "redfish");
    REQUIRE(h.verb("r", ProvisionEvent::kManage));
    Node n = h.wait_stable("r", S::kEnroll);
    CHECK_THAT(n.last_error, Catch::Contains("driver redfish is not available"));
  }
}

TEST_CASE("power actions: target shown while running, result recorded, failures kept") {
  Harness h;
  REQUIRE(h.start());
  h.enroll("p", {{"power_delay_ms", 200}});
  auto r = h.power("p", PowerAction::kOn);
  REQUIRE(r);
  CHECK(r->target_power_state == PowerState::kOn);
  CHECK_FALSE(r->reservation.empty());
  Node n = h.wait_stable("p", S::kEnroll);
  CHECK(n.power_state == PowerState::kOn);
  CHECK_FALSE(n.target_power_state.has_value());

  REQUIRE(h.store().update_node_if("p", {}, [](Node& m) {
    m.bmc.options = {{"fail", {"power"}}};
    return ok_status();
  }, {}));
  REQUIRE(h.power("p", PowerAction::kOff));
  n = h.wait_stable("p", S::kEnroll);
  CHECK(n.power_state == PowerState::kOn);
  CHECK_THAT(n.last_error, Catch::Contains("injected failure in power"));
}

TEST_CASE("maintenance blocks provide and deploy") {
  Harness h;
  REQUIRE(h.start());
  h.enroll("m");
  REQUIRE(h.verb("m", ProvisionEvent::kManage));
  h.wait_stable("m", S::kManageable);
  REQUIRE(h.store().update_node_if("m", {}, [](Node& n) {
    n.maintenance = true;
    n.maintenance_reason = "fan swap";
    return ok_status();
  }, {}));
  auto r = h.verb("m", ProvisionEvent::kProvide);
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message, Catch::Contains("maintenance: fan swap"));
}

TEST_CASE("restart: wait states resume, the others fail with a reason, power actions are cleared") {
  std::string dir = Harness::make_dir();
  std::string deploying_id, verifying_id, power_id;
  {
    Harness h(Harness::fast_options(), dir);
    h.keep_dir();
    // A previous process left these behind (reservations of a dead operation).
    Node d = h.enroll("was-deploying");
    Node v = h.enroll("was-verifying");
    Node p = h.enroll("was-powering");
    deploying_id = d.id;
    verifying_id = v.id;
    power_id = p.id;
    auto hold = [&](const std::string& id, S state, std::string step) {
      REQUIRE(h.store().update_node_if(id, {}, [&](Node& n) {
        n.provision_state = state;
        n.provision_step = step;
        n.reservation = "dead-op";
        n.deadline_at = 0;
        return ok_status();
      }, {}));
    };
    hold(d.id, S::kDeploying, "write_image");
    hold(v.id, S::kVerifying, "verify_bmc");
    REQUIRE(h.store().update_node_if(p.id, {}, [](Node& n) {
      n.reservation = "dead-power-op";
      n.target_power_state = PowerState::kOn;
      return ok_status();
    }, {}));
  }
  Harness h(Harness::fast_options(), dir);
  REQUIRE(h.start());
  Node d = h.wait_stable("was-deploying", S::kActive);
  CHECK(d.last_error.empty());
  Node v = h.wait_stable("was-verifying", S::kEnroll);
  CHECK_THAT(v.last_error, Catch::Contains("kilnd restarted while the node was verifying (step verify_bmc)"));
  Node p = h.get("was-powering");
  CHECK(p.reservation.empty());
  CHECK_FALSE(p.target_power_state.has_value());
  CHECK(p.power_state == PowerState::kUnknown);
  CHECK_THAT(p.last_error, Catch::Contains("restarted during a power action"));
  bool resumed = false;
  for (const auto& e : h.events(deploying_id)) resumed |= e.type == "provision.resumed";
  CHECK(resumed);
  std::filesystem::remove_all(dir);
}

TEST_CASE("validate_bmc names the field at fault") {
  Harness h;
  auto bad = [&](BmcInfo b) {
    Status s = h.conductor().validate_bmc(b);
    REQUIRE_FALSE(s);
    REQUIRE_FALSE(s.error().fields.empty());
    return s.error().fields[0].field;
  };
  CHECK(bad(BmcInfo{}) == "/bmc/driver");
  CHECK(bad(BmcInfo{.driver = "hp-ilo"}) == "/bmc/driver");
  CHECK(bad(BmcInfo{.driver = "fake"}) == "/bmc/address");
  CHECK(bad(BmcInfo{.driver = "fake", .address = "x", .options = {{"colour", 1}}}) == "/bmc/options/colour");
  CHECK(bad(BmcInfo{.driver = "fake", .address = "x", .options = {{"fail", {"nope"}}}}) == "/bmc/options/fail/0");
  CHECK(h.conductor().validate_bmc(BmcInfo{.driver = "fake", .address = "x"}));
  CHECK(h.conductor().validate_bmc(BmcInfo{.driver = "redfish", .address = "https://10.0.0.1"}));
}

TEST_CASE("power sync: drift is recorded, repeated failures fault the node, recovery clears it") {
  ConductorOptions o = Harness::fast_options();
  o.power_sync.interval = std::chrono::milliseconds(0);  // sweeps only when the test asks
  o.power_sync.max_failures = 2;
  Harness h(o);
  REQUIRE(h.start());
  h.enroll("drift");
  h.enroll("flaky");
  h.enroll("manual");
  h.enroll("never-verified");
  for (const char* n : {"drift", "flaky", "manual"}) {
    REQUIRE(h.verb(n, ProvisionEvent::kManage));
    h.wait_stable(n, S::kManageable);
  }
  auto sweep = [&] { return h.sync(h.conductor().power_sync().sweep_once()); };

  // Kiln thinks "drift" is on; the BMC says off.
  REQUIRE(h.store().update_node_if("drift", {}, [](Node& n) {
    n.power_state = PowerState::kOn;
    return ok_status();
  }, {}));
  SweepStats s = sweep();
  CHECK(s.nodes == 3);
  CHECK(s.skipped == 1);  // never-verified is in enroll
  CHECK(s.drifted == 1);
  CHECK(h.get("drift").power_state == PowerState::kOff);
  bool drift_event = false;
  for (const auto& e : h.events(h.get("drift").id))
    drift_event |= e.type == "power.drift" && e.from_state == "on" && e.to_state == "off";
  CHECK(drift_event);

  // "flaky" stops answering; "manual" is in manual maintenance and stops answering too.
  for (const char* n : {"flaky", "manual"}) {
    REQUIRE(h.store().update_node_if(n, {}, [n](Node& m) {
      m.bmc.options = {{"fail", {"power"}}};
      if (std::string(n) == "manual") {
        m.maintenance = true;
        m.maintenance_reason = "DIMM swap";
      }
      return ok_status();
    }, {}));
  }
  s = sweep();
  CHECK(s.failed == 2);
  CHECK(s.faulted == 0);  // one failure is not enough
  CHECK(h.get("flaky").fault.empty());
  s = sweep();
  CHECK(s.faulted == 2);
  Node f = h.get("flaky");
  CHECK(f.fault == "power_failure");
  CHECK(f.maintenance);
  CHECK_THAT(f.maintenance_reason, Catch::StartsWith("power sync: fake driver: injected failure in power"));
  Node m = h.get("manual");
  CHECK(m.fault == "power_failure");
  CHECK(m.maintenance_reason == "DIMM swap");
  // A third failing sweep changes nothing more.
  s = sweep();
  CHECK(s.faulted == 0);

  // They answer again: the fault clears; only automatic maintenance is lifted.
  for (const char* n : {"flaky", "manual"}) {
    REQUIRE(h.store().update_node_if(n, {}, [](Node& x) {
      x.bmc.options = nlohmann::json::object();
      return ok_status();
    }, {}));
  }
  s = sweep();
  CHECK(s.recovered == 2);
  f = h.get("flaky");
  CHECK(f.fault.empty());
  CHECK_FALSE(f.maintenance);
  m = h.get("manual");
  CHECK(m.fault.empty());
  CHECK(m.maintenance);
  CHECK(m.maintenance_reason == "DIMM swap");
}

TEST_CASE("power sync: a BMC password that cannot be decrypted faults the node with that reason at once") {
  ConductorOptions o = Harness::fast_options();
  o.power_sync.interval = std::chrono::milliseconds(0);
  o.power_sync.max_failures = 3;
  Harness h(o);
  REQUIRE(h.start());
  h.enroll("sealed");
  REQUIRE(h.verb("sealed", ProvisionEvent::kManage));
  h.wait_stable("sealed", S::kManageable);
  // Sealed under another key (a restored database, a lost kiln.key): it no longer opens.
  REQUIRE(h.store().update_node_if("sealed", {}, [](Node& n) {
    SecretBox::Key other{};
    other.fill(7);
    n.bmc.password_sealed = SecretBox(other).seal("pw");
    return ok_status();
  }, {}));
  SweepStats s = h.sync(h.conductor().power_sync().sweep_once());
  CHECK(s.failed == 1);
  CHECK(s.faulted == 1);  // not after max_failures sweeps: retrying cannot help
  Node n = h.get("sealed");
  CHECK(n.fault == "power_failure");
  CHECK_THAT(n.last_error, Catch::StartsWith("power sync: cannot decrypt the BMC password"));
  CHECK(n.maintenance);
  // The next sweep leaves it be (one fault, one event).
  s = h.sync(h.conductor().power_sync().sweep_once());
  CHECK(s.faulted == 0);
}

TEST_CASE("power sync skips nodes held by an operation") {
  ConductorOptions o = Harness::fast_options();
  o.power_sync.interval = std::chrono::milliseconds(0);
  Harness h(o);
  REQUIRE(h.start());
  h.enroll("held");
  REQUIRE(h.verb("held", ProvisionEvent::kManage));
  h.wait_stable("held", S::kManageable);
  REQUIRE(h.store().update_node_if("held", {}, [](Node& n) {
    n.bmc.options = {{"power_delay_ms", 3000}};
    return ok_status();
  }, {}));
  REQUIRE(h.power("held", PowerAction::kOn));
  SweepStats s = h.sync(h.conductor().power_sync().sweep_once());
  CHECK(s.skipped == 1);
  CHECK(s.nodes == 0);
}

TEST_CASE("a flow whose driver lacks a step's interface fails before the node is touched") {
  // Agent-driven drivers without clean or deploy used to be called through a
  // null pointer mid-flow; the executor checks every step's needs up front.
  Harness h;
  auto agent = std::make_unique<CountingAgent>();
  std::shared_ptr<std::atomic<int>> agent_calls = agent->calls;
  std::unique_ptr<Driver> d = make_fake_driver(h.executor());
  d->name = "agent-noclean";
  d->clean.reset();
  d->agent = std::move(agent);
  h.add_driver(std::move(d));
  REQUIRE(h.start());
  h.enroll("nc", nlohmann::json::object(), "agent-noclean");
  REQUIRE(h.verb("nc", ProvisionEvent::kManage));
  CHECK(h.wait_stable("nc", S::kManageable).power_state == PowerState::kOff);

  REQUIRE(h.verb("nc", ProvisionEvent::kProvide));
  Node f = h.wait_stable("nc", S::kCleanFailed);
  CHECK_THAT(f.last_error, Catch::Contains("driver agent-noclean cannot clean"));
  CHECK(f.power_state == PowerState::kOff);  // never powered on
  CHECK(*agent_calls == 0);                  // no agent forgotten, none awaited
}

TEST_CASE("an idle conductor with nothing transient makes no store call in 2 s") {
  // A failed pass would be retried every 20 ms, the rate the job used to
  // poll the store at; power sync is off.
  ConductorOptions o = Harness::fast_options();
  o.power_sync.interval = 0ms;
  Harness h(o);
  REQUIRE(h.start());
  h.enroll("idle");
  REQUIRE(h.verb("idle", ProvisionEvent::kManage));
  h.wait_stable("idle", S::kManageable);
  const uint64_t before = h.conductor().job_store_calls();
  CHECK(before > 0);  // start()'s takeover and deadline reads are counted
  std::this_thread::sleep_for(2s);
  CHECK(h.conductor().job_store_calls() == before);
}

TEST_CASE("a node entering deploying with a 1 s timeout is failed at its deadline without a poll") {
  ConductorOptions o = Harness::fast_options();
  o.timeouts[S::kDeploying] = 1s;
  // Neither a retry nor a poll could catch the deadline in time: only
  // waking for it can.
  o.timeout_check_interval = 10s;
  o.power_sync.interval = 0ms;
  Harness h(o);
  REQUIRE(h.start());
  h.enroll("slow");
  REQUIRE(h.verb("slow", ProvisionEvent::kManage));
  h.wait_stable("slow", S::kManageable);
  REQUIRE(h.verb("slow", ProvisionEvent::kProvide));
  h.wait_stable("slow", S::kAvailable);
  REQUIRE(h.store().update_node_if("slow", {}, [](Node& n) {
    n.bmc.options = {{"step_delay_ms", 60000}};
    return ok_status();
  }, {}));
  const uint64_t before = h.conductor().job_store_calls();
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE(h.verb("slow", ProvisionEvent::kDeploy, ProvisionArgs{"img"}));
  Node f = h.wait_stable("slow", S::kDeployFailed, 8s);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK_THAT(f.last_error, Catch::Contains("timed out after 1s in deploying"));
  CHECK(took >= 1s);
  CHECK(took < 4s);
  // One sweep when the deadline passed (the late nodes, then the next
  // deadline), not a read every few milliseconds while it waited.
  CHECK(h.conductor().job_store_calls() - before <= 4);
}
