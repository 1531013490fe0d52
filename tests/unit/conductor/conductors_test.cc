// Several conductors on one store (SQLite, one handle each, as several kilnd
// would share PostgreSQL): membership (join, clean stop, heartbeat loss, a
// conductor that cannot heartbeat stops acting), takeover of a dead
// conductor's operations (wait states resumed, the others failed with the
// reason, each node taken once), and the periodic jobs of each instance
// touching only the nodes it owns.
//
// PostgreSQL: the ConductorStore rows are covered by the conformance suite
// on both stores; several kilnd on one PostgreSQL, with a kill -9, are
// tests/integration/kilnd/scaleout_test.cc.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <iostream>
#include <map>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/conductor/conductor.h"
#include "controller/conductor/hash_ring.h"
#include "controller/conductor/membership.h"
#include "controller/store/store.h"
#include "drivers/fake/fake_driver.h"
#include "tests/support/skip.h"
#include "tests/support/wait_until.h"

using namespace kiln;
using namespace std::chrono_literals;
using S = ProvisionState;

namespace {

struct Timing {
  std::chrono::milliseconds heartbeat;
  std::chrono::milliseconds timeout;
  std::chrono::milliseconds sweep;  // the conductor's timeout check and takeover pass
};

std::string make_dir() {
  char tmpl[] = "/tmp/kiln-conductors-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

// One kilnd: its own store handle, pool, drivers, membership and conductor.
struct Instance {
  std::string host;
  std::unique_ptr<NodeStore> store;
  std::unique_ptr<BlockingPool> db;
  DriverRegistry drivers;
  std::unique_ptr<Membership> membership;
  std::unique_ptr<Conductor> conductor;

  const std::string& id() const { return membership->id(); }
  bool owns(const std::string& node) const { return membership->view()->is_mine(node); }
};

// Conductors sharing one SQLite file, on one io_context with two threads.
class Cluster {
 public:
  Cluster(Timing t, const Clock& clock) : timing_(t), clock_(clock), dir_(make_dir()), work_(asio::make_work_guard(io_)) {
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { io_.run(); });
  }
  ~Cluster() {
    for (auto& i : instances_)
      if (i->conductor) i->conductor->stop();
    work_.reset();
    io_.stop();
    for (auto& t : threads_) t.join();
    for (auto& i : instances_) {
      i->conductor.reset();
      i->membership.reset();
      if (i->db) i->db->stop();
    }
    instances_.clear();
    std::filesystem::remove_all(dir_);
  }

  // Per-state timeouts of the instances added from now on.
  std::map<ProvisionState, std::chrono::milliseconds> timeouts;
  // Power sync's ownership test for the instances added from now on (none:
  // the conductor's, from its membership).
  std::function<bool(std::string_view)> power_sync_owns;

  // Adds an instance on host `host` (not started).
  Instance& add(const std::string& host, bool with_membership = true, bool sole = false, int port = 8080) {
    auto in = std::make_unique<Instance>();
    in->host = host;
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db", .clock = &clock_});
    REQUIRE(s);
    in->store = std::move(*s);
    REQUIRE(in->store->migrate());
    in->db = std::make_unique<BlockingPool>(2);
    in->drivers.add(make_fake_driver(io_.get_executor()));
    ConductorOptions o;
    o.default_timeout = 30s;
    o.timeouts = timeouts;
    o.timeout_check_interval = timing_.sweep;
    o.power_sync.interval = 0ms;
    o.power_sync.owns = power_sync_owns;
    if (with_membership) {
      MembershipOptions m;
      m.host = host;
      m.api_url = "http://" + host + ":" + std::to_string(port);
      m.heartbeat_interval = timing_.heartbeat;
      m.timeout = timing_.timeout;
      m.sole = sole;
      in->membership = std::make_unique<Membership>(io_, *in->store, *in->db, clock_, m, Logger(LogLevel::kOff));
      o.membership = in->membership.get();
    }
    in->conductor = std::make_unique<Conductor>(io_, *in->store, *in->db, in->drivers, box_, clock_, o,
                                                Logger(LogLevel::kOff));
    instances_.push_back(std::move(in));
    return *instances_.back();
  }

  void start(Instance& in) {
    if (in.membership) REQUIRE(sync(in.membership->start()));
    REQUIRE(sync(in.conductor->start()));
  }

  // As a crash: the loops end, nothing is written, the registration is left
  // to time out.
  void kill(Instance& in) {
    in.conductor->stop();
    in.membership->halt();
  }

  template <typename T>
  T sync(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future).get();
  }

  NodeStore& store() { return *instances_.front()->store; }

  Node enroll(const std::string& name) {
    Node n;
    n.name = name;
    n.bmc.driver = "fake";
    n.bmc.address = "bmc-" + name;
    n.bmc.username = "admin";
    n.bmc.password_sealed = box_.seal("pw-" + name);
    static std::atomic<int> next_mac{1};
    int m = next_mac++;
    char mac[32];
    std::snprintf(mac, sizeof mac, "52:54:01:%02x:%02x:01", (m >> 8) & 0xff, m & 0xff);
    Port p;
    p.address = mac;
    n.ports.push_back(p);
    auto r = store().create_node(n, EventDraft{.type = "node.created"});
    REQUIRE(r);
    return *r;
  }

  // Puts `id` in `state` at `step`, held by `op` (an operation that never
  // ran here: what a conductor that died mid-way leaves behind).
  void hold(const std::string& id, S state, const std::string& step, const std::string& op, int64_t deadline = 0) {
    REQUIRE(store().update_node_if(id, {}, [&](Node& n) {
      n.provision_state = state;
      n.provision_step = step;
      n.reservation = op;
      n.deadline_at = deadline;
      return ok_status();
    }, {}));
  }

  Node get(const std::string& id) {
    auto r = store().get_node(id);
    REQUIRE(r);
    return *r;
  }

  std::vector<EventRecord> events(const std::string& node_id) {
    auto r = store().list_events(0, 1000, node_id, std::nullopt);
    REQUIRE(r);
    return *r;
  }

 private:
  Timing timing_;
  const Clock& clock_;
  std::string dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  SecretBox box_{SecretBox::Key{4, 5, 6}};
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<Instance>> instances_;
};

// `a` as a membership only (its operations are rows, nothing runs them) and
// `b` started beside it, both in b's ring; then `count` nodes (named
// prefix0, prefix1, ...) in verifying, held by operations of `a`. Their ids.
std::vector<std::string> hold_by_silent_peer(Cluster& c, Instance& a, Instance& b, const std::string& prefix,
                                             int count) {
  REQUIRE(c.sync(a.membership->start()));
  c.start(b);
  REQUIRE(testing::wait_until([&] { return b.membership->view()->ring().members().size() == 2; }, 2s));
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) {
    Node n = c.enroll(prefix + std::to_string(i));
    c.hold(n.id, S::kVerifying, "verify_bmc", a.id() + "/op-" + std::to_string(i));
    ids.push_back(n.id);
  }
  return ids;
}

int count_events(const std::vector<EventRecord>& evs, const std::string& type) {
  int n = 0;
  for (const EventRecord& e : evs) n += e.type == type;
  return n;
}

}  // namespace

TEST_CASE("conductors: join, clean stop and heartbeat loss change the ring - a silent conductor stops acting") {
  FakeClock clock;
  // The loops never fire on their own: the test steps every refresh.
  Cluster c(Timing{1h, 10s, 1h}, clock);
  Instance& a = c.add("host-a");
  c.start(a);
  Node n1 = c.enroll("n1");
  CHECK(a.membership->view()->ring().members() == std::vector<std::string>{a.id()});
  CHECK(a.owns(n1.id));

  // Join: once each has re-read, both see both, and agree on every owner.
  Instance& b = c.add("host-b");
  Instance& d = c.add("host-d");
  c.start(b);
  c.start(d);
  c.sync(a.membership->refresh());
  c.sync(b.membership->refresh());
  for (Instance* i : {&a, &b, &d}) CHECK(i->membership->view()->ring().members().size() == 3);
  int owned_by_a = 0;
  for (int i = 0; i < 300; ++i) {
    std::string node = "00000000-0000-4000-8000-" + std::to_string(100000000000 + i);
    auto oa = a.membership->view()->owner_of(node);
    CHECK(oa == b.membership->view()->owner_of(node));
    CHECK(oa == d.membership->view()->owner_of(node));
    CHECK((a.owns(node) ? 1 : 0) + (b.owns(node) ? 1 : 0) + (d.owns(node) ? 1 : 0) == 1);
    owned_by_a += a.owns(node);
  }
  CHECK(owned_by_a > 50);
  CHECK(owned_by_a < 150);

  // Clean stop: gone from the ring at the others' next refresh, no waiting.
  REQUIRE(d.membership->stop());
  c.sync(a.membership->refresh());
  CHECK_FALSE(a.membership->view()->is_alive(d.id()));
  CHECK(a.membership->view()->ring().members().size() == 2);

  // Heartbeat loss: b goes silent; after the timeout a alone is alive and
  // owns every node.
  clock.advance_ms(6000);
  c.sync(a.membership->refresh());
  CHECK(a.membership->view()->is_alive(b.id()));
  clock.advance_ms(5000);  // 11 s since b's last heartbeat
  c.sync(a.membership->refresh());
  CHECK_FALSE(a.membership->view()->is_alive(b.id()));
  CHECK(a.membership->view()->ring().members() == std::vector<std::string>{a.id()});
  CHECK(a.owns(n1.id));

  // A conductor that cannot heartbeat for the timeout stops acting as owner
  // (it would otherwise work beside the node's new owner), and acts again
  // once a heartbeat goes through.
  clock.advance_ms(10001);
  CHECK_FALSE(a.membership->view()->acting());
  CHECK_FALSE(a.owns(n1.id));
  c.sync(a.membership->refresh());
  CHECK(a.membership->view()->acting());
  CHECK(a.owns(n1.id));
}

TEST_CASE("conductors: a restart stops the previous incarnation - sole (SQLite) stops every other registration") {
  FakeClock clock;
  Cluster c(Timing{1h, 10s, 1h}, clock);
  Instance& first = c.add("host-a");
  Instance& other = c.add("host-b");
  c.start(first);
  c.start(other);
  // The same host and URL again: the previous process, stopped at once.
  Instance& again = c.add("host-a");
  c.start(again);
  CHECK_FALSE(again.membership->view()->is_alive(first.id()));
  CHECK(again.membership->view()->is_alive(other.id()));
  // One kilnd per data directory: whatever else is registered is gone.
  Instance& sole = c.add("host-c", true, /*sole=*/true);
  c.start(sole);
  auto rows = c.store().list_conductors();
  REQUIRE(rows);
  for (const ConductorRecord& r : *rows) CHECK((r.id == sole.id()) == (r.stopped_at == 0));
  CHECK(sole.membership->view()->ring().members() == std::vector<std::string>{sole.id()});
}

TEST_CASE("conductors: a dead conductor's operations are taken over by the survivors within timeout + a sweep, once each") {
  SystemClock clock;
  // A 1.5 s timeout with 50 ms heartbeats: a survivor must miss 30 beats in a
  // row to be thought dead too. At 500 ms, CI (2 cores, ASan, two suites at
  // once) once stalled a survivor that long, and the other took every node.
  const Timing t{50ms, 1500ms, 50ms};
  Cluster c(t, clock);
  Instance& a = c.add("host-a");
  Instance& b = c.add("host-b");
  // On a's machine, another port: a survivor, not a's next incarnation.
  Instance& d = c.add("host-a", true, false, 8081);
  // a's operations below are rows only, as if a ran them: its conductor is
  // not started (it would adopt them, being named in their ids), only its
  // membership.
  REQUIRE(c.sync(a.membership->start()));
  for (Instance* i : {&b, &d}) c.start(*i);
  REQUIRE(testing::wait_until([&] { return b.membership->view()->ring().members().size() == 3 &&
                                           d.membership->view()->ring().members().size() == 3 &&
                                           a.membership->view()->ring().members().size() == 3; }, 2s));

  // What a crashing `a` leaves behind: deploys waiting on their agent (a
  // wait state), verifies (not resumable) and power actions.
  std::vector<std::string> deploying, verifying, powering, power_ops;
  for (int i = 0; i < 30; ++i) {
    Node n = c.enroll("n" + std::to_string(i));
    const std::string op = a.id() + "/op-" + std::to_string(i);
    if (i % 3 == 0) {
      c.hold(n.id, S::kDeploying, "write_image", op);
      deploying.push_back(n.id);
    } else if (i % 3 == 1) {
      c.hold(n.id, S::kVerifying, "verify_bmc", op);
      verifying.push_back(n.id);
    } else {
      REQUIRE(c.store().update_node_if(n.id, {}, [&](Node& m) {
        m.reservation = op;
        m.target_power_state = PowerState::kOn;
        return ok_status();
      }, {}));
      powering.push_back(n.id);
      power_ops.push_back(op);
    }
  }
  // While `a` is alive its operations are its own: several sweeps later,
  // nobody has touched them.
  std::this_thread::sleep_for(t.sweep * 6);
  for (int i = 0; i < 30; ++i) CHECK(c.get("n" + std::to_string(i)).reservation == a.id() + "/op-" + std::to_string(i));

  const auto killed = std::chrono::steady_clock::now();
  c.kill(a);
  auto not_a = [&](const std::string& id) { return runner_of(c.get(id).reservation) != a.id(); };
  bool all_taken = testing::wait_until([&] {
    for (int i = 0; i < 30; ++i)
      if (!not_a(c.store().get_node("n" + std::to_string(i))->id)) return false;
    return true;
  }, 10s, 5ms);
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
  REQUIRE(all_taken);
  std::cout << "conductors: takeover of 30 nodes took " << took.count() << " ms (heartbeat " << t.heartbeat.count()
            << " ms, timeout " << t.timeout.count() << " ms, sweep " << t.sweep.count() << " ms)\n";
  // The last heartbeat was up to one interval before the kill; then the
  // timeout, a survivor's refresh and its sweep. Generous for a loaded box.
  CHECK(took < t.timeout + t.heartbeat + t.sweep + 1500ms);

  // Each resumed deploy went to its owner on the ring of the survivors, which
  // both compute alone (10 nodes: usually both get some, but which is the
  // ring's to say, not chance's).
  const HashRing survivors({b.id(), d.id()});
  for (const std::string& id : deploying) {
    auto resumed = c.events(id);
    REQUIRE(count_events(resumed, "provision.resumed") == 1);  // taken over once
    for (const EventRecord& e : resumed)
      if (e.type == "provision.resumed") {
        const std::string runner = runner_of(e.detail.value("op", ""));
        CHECK(runner == survivors.owner(id).value_or(""));
        CHECK(e.detail.value("previous_op", "").rfind(a.id(), 0) == 0);
      }
  }
  for (const std::string& id : deploying) {
    REQUIRE(testing::wait_until([&] { Node n = c.get(id); return n.provision_state == S::kActive && n.reservation.empty(); }, 10s));
    CHECK(c.get(id).last_error.empty());
  }
  const std::string cause = "conductor " + a.id() + " (host-a) stopped heartbeating";
  for (const std::string& id : verifying) {
    Node n = c.get(id);
    CHECK(n.provision_state == S::kEnroll);
    CHECK(n.reservation.empty());
    CHECK(n.last_error == cause + " while the node was verifying (step verify_bmc); the operation was interrupted");
    int failures = 0;
    for (const EventRecord& e : c.events(id))
      if (e.type == "provision.transition" && e.detail.value("outcome", "") == "takeover") ++failures;
    CHECK(failures == 1);
  }
  for (std::size_t k = 0; k < powering.size(); ++k) {
    const std::string& id = powering[k];
    Node n = c.get(id);
    CHECK(n.reservation.empty());
    CHECK(n.power_state == PowerState::kUnknown);
    CHECK_FALSE(n.target_power_state.has_value());
    CHECK(n.last_error == cause + " during a power action; the power state is unknown until re-read");
    CHECK(count_events(c.events(id), "power.failed") == 1);
    // The takeover's result names the operation it ends, as the runner's
    // own result would: one result per power op, joined by op.
    for (const EventRecord& e : c.events(id))
      if (e.type == "power.failed") CHECK(e.detail.value("op", "") == power_ops[k]);
  }
}

TEST_CASE("conductors: two survivors racing for the same nodes, one with a stale ring, take each one once") {
  // The worst case of two views that disagree: x has not yet seen y join, so
  // x believes it owns every node, while y owns half of them; both go for a
  // dead conductor's nodes at the same moment. The conditional write on the
  // old reservation lets one win per node, and neither takes over what the
  // other has just resumed (y's id is in the store before its first
  // reservation, whatever x's view says).
  SystemClock clock;
  Cluster c(Timing{1h, 10s, 1h}, clock);
  Instance& x = c.add("host-x");
  c.start(x);
  REQUIRE(c.store().register_conductor({"g", "host-g", "http://host-g:8080", 0, 0, 0}));
  std::vector<std::string> deploying, verifying;
  for (int i = 0; i < 40; ++i) {
    Node n = c.enroll("r" + std::to_string(i));
    if (i % 2 == 0) {
      c.hold(n.id, S::kDeploying, "write_image", "g/op-" + std::to_string(i));
      deploying.push_back(n.id);
    } else {
      c.hold(n.id, S::kVerifying, "verify_bmc", "g/op-" + std::to_string(i));
      verifying.push_back(n.id);
    }
  }
  REQUIRE(c.store().stop_conductor("g"));
  c.sync(x.membership->refresh());  // x: g is dead, x alone is alive
  Instance& y = c.add("host-y");
  REQUIRE(x.membership->view()->ring().members() == std::vector<std::string>{x.id()});
  auto fx = std::async(std::launch::async, [&] { c.sync(x.conductor->sweep_once()); });
  auto fy = std::async(std::launch::async, [&] { c.start(y); });
  fx.get();
  fy.get();
  int by_y = 0;
  for (const std::string& id : deploying) {
    REQUIRE(testing::wait_until([&] { return c.get(id).provision_state == S::kActive; }, 10s));
    auto evs = c.events(id);
    CHECK(count_events(evs, "provision.resumed") == 1);
    for (const EventRecord& e : evs)
      if (e.type == "provision.resumed") by_y += runner_of(e.detail.value("op", "")) == y.id();
  }
  for (const std::string& id : verifying) {
    CHECK(c.get(id).provision_state == S::kEnroll);
    CHECK(c.get(id).last_error.rfind("conductor g (host-g) stopped while the node was verifying", 0) == 0);
    int failures = 0;
    for (const EventRecord& e : c.events(id)) failures += e.type == "provision.transition";
    CHECK(failures == 1);
  }
  INFO("resumed by y: " << by_y);
  CHECK(by_y < static_cast<int>(deploying.size()));  // x, with its stale ring, took some too
}

TEST_CASE("conductors: the deadline sweep and power sync of each instance touch only the nodes it owns") {
  SystemClock clock;
  // Loops idle (sweep 1 h, power sync off): the test runs each sweep itself.
  Cluster c(Timing{50ms, 10s, 1h}, clock);
  Instance& a = c.add("host-a");
  Instance& b = c.add("host-b");
  c.start(a);
  c.start(b);
  c.sync(a.membership->refresh());
  REQUIRE(a.membership->view()->ring().members().size() == 2);

  std::vector<std::string> late, idle;
  for (int i = 0; i < 40; ++i) {
    Node n = c.enroll("s" + std::to_string(i));
    if (i % 2 == 0) {
      // Past its deadline, run by a live conductor (so not a takeover).
      c.hold(n.id, S::kDeploying, "write_image", b.id() + "/op-" + std::to_string(i), clock.now_ms() - 1000);
      late.push_back(n.id);
    } else {
      REQUIRE(c.store().update_node_if(n.id, {}, [](Node& m) {
        m.provision_state = S::kManageable;
        return ok_status();
      }, {}));
      idle.push_back(n.id);
    }
  }
  int a_late = 0, a_idle = 0;
  for (const std::string& id : late) a_late += a.owns(id);
  for (const std::string& id : idle) a_idle += a.owns(id);
  REQUIRE(a_late > 0);
  REQUIRE(a_late < static_cast<int>(late.size()));
  REQUIRE(a_idle > 0);
  REQUIRE(a_idle < static_cast<int>(idle.size()));

  c.sync(a.conductor->sweep_once());
  for (const std::string& id : late)
    CHECK((c.get(id).provision_state == S::kDeployFailed) == a.owns(id));
  c.sync(b.conductor->sweep_once());
  for (const std::string& id : late) CHECK(c.get(id).provision_state == S::kDeployFailed);

  // Power sync asks the BMCs of a's nodes only (the failed deploys are free
  // now, so every node a owns is asked).
  int a_all = a_late + a_idle;
  SweepStats sa = c.sync(a.conductor->power_sync().sweep_once());
  CHECK(sa.nodes + sa.skipped == static_cast<std::size_t>(a_all));
  SweepStats sb = c.sync(b.conductor->power_sync().sweep_once());
  CHECK(sb.nodes + sb.skipped == static_cast<std::size_t>(40 - a_all));
}

TEST_CASE("conductors: power sync reads only the nodes on its own arcs of the ring, not every node") {
  SystemClock clock;
  Cluster c(Timing{50ms, 10s, 1h}, clock);
  // Power sync's final ownership test accepts every node, so what a sweep
  // counts is what it read from the store: its ring ranges alone.
  c.power_sync_owns = [](std::string_view) { return true; };
  Instance& a = c.add("host-a");
  Instance& b = c.add("host-b");
  c.start(a);
  c.start(b);
  c.sync(a.membership->refresh());
  c.sync(b.membership->refresh());
  REQUIRE(a.membership->view()->ring().members().size() == 2);
  REQUIRE(b.membership->view()->ring().members().size() == 2);

  int a_owns = 0;
  for (int i = 0; i < 40; ++i) {
    Node n = c.enroll("r" + std::to_string(i));
    REQUIRE(c.store().update_node_if(n.id, {}, [](Node& m) {
      m.provision_state = S::kManageable;
      return ok_status();
    }, {}));
    a_owns += a.owns(n.id);
  }
  REQUIRE(a_owns > 0);
  REQUIRE(a_owns < 40);
  SweepStats sa = c.sync(a.conductor->power_sync().sweep_once());
  CHECK(sa.nodes + sa.skipped == static_cast<std::size_t>(a_owns));
  SweepStats sb = c.sync(b.conductor->power_sync().sweep_once());
  CHECK(sb.nodes + sb.skipped == static_cast<std::size_t>(40 - a_owns));
}

TEST_CASE("conductors: a verb taken by an instance that does not own the node runs on the owner") {
  SystemClock clock;
  Cluster c(Timing{50ms, 5s, 50ms}, clock);
  Instance& x = c.add("host-x");
  Instance& y = c.add("host-y");
  for (Instance* i : {&x, &y}) c.start(*i);
  REQUIRE(testing::wait_until([&] { return x.membership->view()->ring().members().size() == 2 &&
                                           y.membership->view()->ring().members().size() == 2; }, 2s));
  auto owner_of = [&](const Node& n) { return x.owns(std::string(ownership_key(n))) ? &x : &y; };
  auto other = [&](Instance* i) { return i == &x ? &y : &x; };

  // Every verb goes to the instance that does not own its node: the write
  // (state and reservation) is done there, the flow runs on the owner.
  std::vector<Node> nodes;
  std::map<Instance*, int> owned;
  for (int i = 0; i < 20; ++i) {
    nodes.push_back(c.enroll("h" + std::to_string(i)));
    ++owned[owner_of(nodes.back())];
  }
  REQUIRE(owned.size() == 2);  // 20 nodes over two members: both own some
  for (const Node& n : nodes) {
    Instance* owner = owner_of(n);
    auto r = c.sync(other(owner)->conductor->provision(n.name, ProvisionEvent::kManage, {}, Actor{}));
    REQUIRE(r);
    CHECK(r->provision_state == S::kVerifying);
    CHECK(runner_of(r->reservation) == owner->id());
  }
  for (const Node& n : nodes)
    REQUIRE(testing::wait_until([&] { Node m = c.get(n.id); return m.provision_state == S::kManageable && m.reservation.empty(); }, 10s));
  // Each instance ran only its own nodes' operations (the verbs it took
  // were all for the other's), counted under the state it adopted them in.
  auto successes = [](Instance* i) {
    uint64_t n = 0;
    for (const auto& [key, count] : i->conductor->operation_counts()) n += key.second == "success" ? count : 0;
    return n;
  };
  // (An operation is counted just after the write that frees its node: wait.)
  for (Instance* i : {&x, &y}) {
    CHECK(testing::wait_until([&] { return successes(i) == static_cast<uint64_t>(owned[i]); }, 5s));
    CHECK(i->conductor->operation_counts()[{"verifying", "success"}] == static_cast<uint64_t>(owned[i]));
  }

  // A deploy with an allocation moves its nodes to the allocation's owner:
  // all ten operations are named for that one conductor.
  for (const Node& n : nodes)
    REQUIRE(c.sync(x.conductor->provision(n.name, ProvisionEvent::kProvide, {}, Actor{})));
  for (const Node& n : nodes)
    REQUIRE(testing::wait_until([&] { Node m = c.get(n.id); return m.provision_state == S::kAvailable && m.reservation.empty(); }, 10s));
  const std::string group = "grp-1";
  Instance* group_owner = x.owns(group) ? &x : &y;
  for (int i = 0; i < 10; ++i) {
    Instance* via = i % 2 == 0 ? &x : &y;
    auto r = c.sync(via->conductor->provision(nodes[i].name, ProvisionEvent::kDeploy, {"", group}, Actor{}));
    REQUIRE(r);
    CHECK(runner_of(r->reservation) == group_owner->id());
  }
  for (int i = 0; i < 10; ++i) {
    REQUIRE(testing::wait_until([&] { Node m = c.get(nodes[i].id); return m.provision_state == S::kActive && m.reservation.empty(); }, 10s));
    CHECK(group_owner->owns(std::string(ownership_key(c.get(nodes[i].id)))));
  }
  auto deploys = [](Instance* i) {
    auto counts = i->conductor->operation_counts();
    return counts[{"deploy", "success"}] + counts[{"deploying", "success"}];
  };
  CHECK(testing::wait_until([&] { return deploys(group_owner) == 10u; }, 5s));
  CHECK(deploys(other(group_owner)) == 0u);
}

TEST_CASE("conductors: kicked by events, an owner reads the nodes it holds only when an event hands it an operation") {
  // The event-driven pass looks through the events published since its last
  // look for one naming an operation of its own; the nodes are read only
  // then. A node held for it without any event (written behind the
  // conductors' backs) is therefore left to the periodic pass, a minute away
  // here, until an event hands it something.
  SystemClock clock;
  Cluster c(Timing{50ms, 5s, 60s}, clock);
  Instance& x = c.add("host-x");
  Instance& y = c.add("host-y");
  for (Instance* i : {&x, &y}) c.start(*i);
  REQUIRE(testing::wait_until([&] { return x.membership->view()->ring().members().size() == 2 &&
                                           y.membership->view()->ring().members().size() == 2; }, 2s));
  std::vector<Node> mine;  // owned by y
  for (int i = 0; i < 40 && mine.size() < 2; ++i) {
    Node n = c.enroll("k" + std::to_string(i));
    if (y.owns(std::string(ownership_key(n)))) mine.push_back(n);
  }
  REQUIRE(mine.size() == 2);
  // A kick's pass, begun (its first store call counted), then given time to
  // finish and to start what it adopts.
  auto kicked = [&] {
    const uint64_t before = y.conductor->job_store_calls();
    y.conductor->kick();
    REQUIRE(testing::wait_until([&] { return y.conductor->job_store_calls() > before; }, 5s));
    std::this_thread::sleep_for(200ms);
  };
  kicked();  // the first look reads the nodes

  c.hold(mine[0].id, S::kVerifying, "", y.id() + "/held-silently");
  c.enroll("unrelated");  // an event, naming no operation
  kicked();
  Node silent = c.get(mine[0].id);
  CHECK(silent.provision_state == S::kVerifying);
  CHECK(silent.reservation == y.id() + "/held-silently");

  // A verb taken by x for y's node: its transition names y's operation.
  auto r = c.sync(x.conductor->provision(mine[1].name, ProvisionEvent::kManage, {}, Actor{}));
  REQUIRE(r);
  REQUIRE(runner_of(r->reservation) == y.id());
  y.conductor->kick();
  // y reads its nodes and adopts both.
  for (const Node& n : mine)
    CHECK(testing::wait_until([&] { Node m = c.get(n.id); return m.provision_state == S::kManageable && m.reservation.empty(); }, 5s));
}

TEST_CASE("conductors: an operation handed to a conductor that dies before starting it is taken over like its own") {
  SystemClock clock;
  const Timing t{50ms, 1500ms, 50ms};
  Cluster c(t, clock);
  Instance& x = c.add("host-x");
  Instance& y = c.add("host-y");
  // y is a membership only: it never starts what it is handed (as if it
  // died right after the verb's write), then it goes silent.
  REQUIRE(c.sync(y.membership->start()));
  c.start(x);
  REQUIRE(testing::wait_until([&] { return x.membership->view()->ring().members().size() == 2; }, 2s));
  Node n;
  for (int i = 0;; ++i) {
    REQUIRE(i < 200);
    n = c.enroll("d" + std::to_string(i));
    if (x.membership->view()->owner_of(n.id) == y.id()) break;  // as x, which takes the verb, sees it
  }
  auto r = c.sync(x.conductor->provision(n.name, ProvisionEvent::kManage, {}, Actor{}));
  REQUIRE(r);
  CHECK(runner_of(r->reservation) == y.id());
  // Not x's to run: several sweeps later it is still y's, untouched.
  std::this_thread::sleep_for(t.sweep * 6);
  CHECK(c.get(n.id).reservation == r->reservation);
  c.kill(y);
  // x takes it over once y is dead: verifying is not resumable, so it fails
  // with the reason, nothing left held.
  REQUIRE(testing::wait_until([&] { return c.get(n.id).reservation.empty(); }, 10s));
  Node m = c.get(n.id);
  CHECK(m.provision_state == S::kEnroll);
  CHECK_THAT(m.last_error, Catch::Contains("conductor " + y.id() + " (host-y) stopped heartbeating while the node was verifying"));
}

TEST_CASE("conductors: a dead conductor's nodes are taken over at the view change, with no periodic sweep") {
  SystemClock clock;
  // The sweep never comes (1 h): only the survivor's view change, which
  // sees `a` go silent, can start the takeover.
  const Timing t{50ms, 1500ms, 1h};
  Cluster c(t, clock);
  Instance& a = c.add("host-a");
  Instance& b = c.add("host-b");
  const std::vector<std::string> ids = hold_by_silent_peer(c, a, b, "v", 6);
  const auto killed = std::chrono::steady_clock::now();
  c.kill(a);
  REQUIRE(testing::wait_until([&] {
    for (const std::string& id : ids)
      if (!c.get(id).reservation.empty()) return false;
    return true;
  }, 10s, 5ms));
  const auto took = std::chrono::steady_clock::now() - killed;
  CHECK(took < t.timeout + t.heartbeat + 1500ms);
  for (const std::string& id : ids) {
    Node n = c.get(id);
    CHECK(n.provision_state == S::kEnroll);
    CHECK_THAT(n.last_error, Catch::Contains("conductor " + a.id() + " (host-a) stopped heartbeating"));
  }
}

TEST_CASE("conductors: a takeover pass that outlasts the view it began with still takes every node over") {
  SystemClock clock;
  // A view says "acting" only until its own heartbeat is `timeout` old. The
  // survivor heartbeats every 30 ms, so the view published now acts (or, if
  // a heartbeat is late on a busy machine, the pass is retried 200 ms on);
  // the one a pass began with stops acting 150 ms later, and hundreds of
  // nodes take a pass longer than that. The full pass (60 s) does not come
  // within the test: nodes the pass judged with its stale view as "not
  // mine" would wait for it.
  const Timing t{30ms, 150ms, 200ms};
  Cluster c(t, clock);
  Instance& a = c.add("host-a");
  Instance& b = c.add("host-b");
  constexpr int kNodes = 400;
  hold_by_silent_peer(c, a, b, "w", kNodes);
  auto enrolled = [&] {
    auto counts = c.store().count_nodes_by_state();
    REQUIRE(counts);
    auto it = counts->find("enroll");
    return it == counts->end() ? int64_t{0} : it->second;
  };
  c.kill(a);
  REQUIRE(testing::wait_until([&] { return enrolled() > 0; }, 10s, 2ms));
  const auto first = std::chrono::steady_clock::now();
  REQUIRE(testing::wait_until([&] { return enrolled() == kNodes; }, 10s, 2ms));
  const auto pass = std::chrono::steady_clock::now() - first;
  // Shorter than the window, the pass proves nothing about it.
  if (pass < t.timeout) KILN_SKIP("the takeover pass took " << std::chrono::duration_cast<std::chrono::milliseconds>(pass).count()
                                  << " ms, inside one view's acting window: this machine cannot show the case");
}

TEST_CASE("conductors: a sole conductor with nothing transient makes no store call between heartbeats") {
  SystemClock clock;
  // Heartbeats and the old sweep every 20 ms: 50 of each in a second.
  Cluster c(Timing{20ms, 10s, 20ms}, clock);
  Instance& a = c.add("host-a", true, /*sole=*/true);
  c.start(a);
  c.enroll("quiet");
  const uint64_t before = a.conductor->job_store_calls();
  std::this_thread::sleep_for(1s);
  CHECK(a.conductor->job_store_calls() == before);
}

TEST_CASE("conductors: an operation handed over with a 1 s deadline is failed by its owner at that deadline") {
  SystemClock clock;
  // Adoption every 50 ms; the owner learns the deadline only from the node
  // its adopted operation reads (a full pass is a minute away).
  Cluster c(Timing{50ms, 5s, 50ms}, clock);
  c.timeouts[S::kDeploying] = 1s;
  Instance& x = c.add("host-x");
  Instance& y = c.add("host-y");
  for (Instance* i : {&x, &y}) c.start(*i);
  REQUIRE(testing::wait_until([&] { return x.membership->view()->ring().members().size() == 2 &&
                                           y.membership->view()->ring().members().size() == 2; }, 2s));
  Node n;
  for (int i = 0;; ++i) {
    REQUIRE(i < 200);
    n = c.enroll("late" + std::to_string(i));
    if (x.membership->view()->owner_of(n.id) == y.id()) break;
  }
  REQUIRE(c.sync(x.conductor->provision(n.name, ProvisionEvent::kManage, {}, Actor{})));
  REQUIRE(testing::wait_until([&] { Node m = c.get(n.id); return m.provision_state == S::kManageable && m.reservation.empty(); }, 10s));
  REQUIRE(c.sync(x.conductor->provision(n.name, ProvisionEvent::kProvide, {}, Actor{})));
  REQUIRE(testing::wait_until([&] { Node m = c.get(n.id); return m.provision_state == S::kAvailable && m.reservation.empty(); }, 10s));
  REQUIRE(c.store().update_node_if(n.id, {}, [](Node& m) {
    m.bmc.options = {{"step_delay_ms", 60000}};  // the deploy hangs
    return ok_status();
  }, {}));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.sync(x.conductor->provision(n.name, ProvisionEvent::kDeploy, {}, Actor{}));
  REQUIRE(r);
  CHECK(runner_of(r->reservation) == y.id());
  REQUIRE(testing::wait_until([&] { return c.get(n.id).provision_state == S::kDeployFailed; }, 10s, 5ms));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 1s);
  CHECK(took < 4s);
  CHECK_THAT(c.get(n.id).last_error, Catch::Contains("timed out after 1s in deploying"));
  // Counted by the owner just after its write: wait for it.
  CHECK(testing::wait_until([&] { return y.conductor->operation_counts()[{"deploying", "timeout"}] == 1; }, 5s));
  CHECK(x.conductor->operation_counts()[{"deploying", "timeout"}] == 0);
}
