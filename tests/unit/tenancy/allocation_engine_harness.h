#pragma once
// What the allocation engine tests share: the engine against a real SQLite
// store, the real conductor and fake-driver nodes, its store calls counted
// (and, where a case needs it, held at a gate or failed) on the way through.
// A Harness's engine is driven batch by batch with run_pass(), or start()ed
// with every committed event kicking it, as kilnd wires it.

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>

#include "common/ids.h"
#include "controller/conductor/conductor.h"
#include "controller/conductor/membership.h"
#include "controller/model/allocation_states.h"
#include "controller/store/store.h"
#include "controller/tenancy/allocation_engine.h"
#include "drivers/fake/fake_driver.h"
#include "tests/support/wait_until.h"

namespace kiln::test {

using namespace std::chrono_literals;


// Holds one store call until the test opens it: arm() it, and the next call
// that passes it waits (entered() says it has come) until open().
class Gate {
 public:
  void arm() {
    std::lock_guard<std::mutex> l(mu_);
    armed_ = true;
    entered_ = false;
    open_ = false;
  }
  // Waits (at most `limit`) until an armed gate holds a call; false if none came.
  bool entered(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, limit, [this] { return entered_; });
  }
  void open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Called by the store call (on a pool thread).
  void pass() {
    std::unique_lock<std::mutex> l(mu_);
    if (!armed_) return;
    armed_ = false;
    entered_ = true;
    cv_.notify_all();
    cv_.wait(l, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool entered_ = false;
  bool open_ = false;
};

// The three aggregates the engine uses, passed through to a real store, each
// call counted by name. A call named in gate() waits there when it is armed
// (in_flight_with_nodes after its read, so that what it returns predates
// what is written while it waits; the others before they run), and one
// named in fail() returns that error instead of running.
class CountingStores final : public AllocationStore, public EventLog, public CatalogueStore {
 public:
  explicit CountingStores(NodeStore& s) : s_(s) {}

  Gate& gate(const std::string& call) {
    std::lock_guard<std::mutex> l(mu_);
    std::unique_ptr<Gate>& g = gates_[call];
    if (!g) g = std::make_unique<Gate>();
    return *g;
  }
  // The next `times` calls of `call` fail with `e`.
  void fail(const std::string& call, Error e, int times = 1) {
    std::lock_guard<std::mutex> l(mu_);
    failures_[call] = {std::move(e), times};
  }

  uint64_t total() const {
    std::lock_guard<std::mutex> l(mu_);
    uint64_t n = 0;
    for (const auto& [name, count] : calls_) n += count;
    return n;
  }
  std::map<std::string, uint64_t> calls() const {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  void reset() {
    std::lock_guard<std::mutex> l(mu_);
    calls_.clear();
  }

  // AllocationStore
  Result<Allocation> create_allocation(const Allocation& a, const std::vector<EventDraft>& e,
                                       const VirtualNodeMaker* v) override {
    count("create_allocation");
    return s_.create_allocation(a, e, v);
  }
  Result<Allocation> get_allocation(std::string_view id, std::string_view tenant) override {
    count("get_allocation");
    return s_.get_allocation(id, tenant);
  }
  Result<AllocationWithNodes> get_allocation_with_nodes(std::string_view id, std::string_view tenant) override {
    count("get_allocation_with_nodes");
    return s_.get_allocation_with_nodes(id, tenant);
  }
  Result<std::vector<Allocation>> list_allocations(const AllocationFilter& f) override {
    count("list_allocations");
    return s_.list_allocations(f);
  }
  Result<std::vector<Node>> member_nodes(std::span<const Allocation> all) override {
    count("member_nodes");
    return s_.member_nodes(all);
  }
  Result<std::vector<Allocation>> allocations_in_flight() override {
    count("allocations_in_flight");
    return s_.allocations_in_flight();
  }
  Result<AllocationsWithNodes> in_flight_with_nodes(const std::optional<AllocationScope>& scope) override {
    count("in_flight_with_nodes");
    Result<AllocationsWithNodes> read = s_.in_flight_with_nodes(scope);
    gate("in_flight_with_nodes").pass();
    return read;
  }
  Result<Allocation> update_allocation_if(std::string_view id, std::optional<int64_t> v,
                                          const std::function<Status(Allocation&)>& m,
                                          const std::vector<EventDraft>& e) override {
    count("update_allocation_if");
    return s_.update_allocation_if(id, v, m, e);
  }
  Result<Allocation> update_allocation_with_usage(std::string_view id,
                                                  const std::function<Status(Allocation&, LedgerWrites&)>& m,
                                                  const std::vector<EventDraft>& e) override {
    count("update_allocation_with_usage");
    if (std::optional<Error> f = failure("update_allocation_with_usage")) return *f;
    return s_.update_allocation_with_usage(id, m, e);
  }
  Result<Allocation> leave_member(std::string_view id, std::string_view node, MemberStatus st, const std::string& r,
                                  bool replace, const std::vector<EventDraft>& e,
                                  const VirtualNodeMaker* v) override {
    count("leave_member");
    gate("leave_member").pass();
    return s_.leave_member(id, node, st, r, replace, e, v);
  }
  Result<MembersLeft> leave_members(std::string_view id, const std::vector<MemberLeave>& l) override {
    count("leave_members");
    gate("leave_members").pass();
    return s_.leave_members(id, l);
  }
  Result<std::map<std::string, int64_t>> count_allocations_by_state() override {
    count("count_allocations_by_state");
    return s_.count_allocations_by_state();
  }
  Status open_usage(const std::vector<UsageRecord>& rows) override {
    count("open_usage");
    return s_.open_usage(rows);
  }
  Status close_usage(std::string_view a, std::string_view n, int64_t at) override {
    count("close_usage");
    gate("close_usage").pass();
    if (std::optional<Error> f = failure("close_usage")) return *f;
    return s_.close_usage(a, n, at);
  }
  Result<std::vector<UsageRecord>> list_usage(const UsageFilter& f) override {
    count("list_usage");
    return s_.list_usage(f);
  }

  // EventLog
  Result<std::vector<EventRecord>> list_events(int64_t since, int limit, std::optional<std::string> node,
                                               std::optional<std::string> tenant) override {
    count("list_events");
    return s_.list_events(since, limit, std::move(node), std::move(tenant));
  }
  Result<int64_t> last_event_seq() override {
    count("last_event_seq");
    return s_.last_event_seq();
  }
  void set_event_listener(std::function<void(int64_t)> l) override { s_.set_event_listener(std::move(l)); }
  Status append_audit(const AuditRecord& r) override {
    count("append_audit");
    return s_.append_audit(r);
  }
  Result<std::vector<AuditRecord>> list_audit(int64_t since, int limit) override {
    count("list_audit");
    return s_.list_audit(since, limit);
  }
  Status append_events(const std::vector<EventDraft>& e) override {
    count("append_events");
    return s_.append_events(e);
  }

  // CatalogueStore
  Result<Image> create_image(const Image& i) override {
    count("create_image");
    return s_.create_image(i);
  }
  Result<Image> get_image(std::string_view id) override {
    count("get_image");
    return s_.get_image(id);
  }
  Result<std::vector<Image>> list_images() override {
    count("list_images");
    return s_.list_images();
  }
  Status delete_image(std::string_view id) override {
    count("delete_image");
    return s_.delete_image(id);
  }
  Result<Image> update_image(const Image& i) override {
    count("update_image");
    return s_.update_image(i);
  }
  Result<Image> set_image_public(std::string_view id, bool p) override {
    count("set_image_public");
    return s_.set_image_public(id, p);
  }
  Result<Profile> create_profile(const Profile& p) override {
    count("create_profile");
    return s_.create_profile(p);
  }
  Result<Profile> get_profile(std::string_view name) override {
    count("get_profile");
    return s_.get_profile(name);
  }
  Result<std::vector<Profile>> list_profiles() override {
    count("list_profiles");
    return s_.list_profiles();
  }
  Result<Profile> replace_profile(const Profile& p, std::optional<int64_t> v) override {
    count("replace_profile");
    return s_.replace_profile(p, v);
  }
  Status delete_profile(std::string_view name) override {
    count("delete_profile");
    return s_.delete_profile(name);
  }
  Result<std::vector<std::string>> seed_profiles(const std::vector<Profile>& d) override {
    count("seed_profiles");
    return s_.seed_profiles(d);
  }

 private:
  void count(const char* name) {
    std::lock_guard<std::mutex> l(mu_);
    calls_[name]++;
  }
  std::optional<Error> failure(const std::string& call) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = failures_.find(call);
    if (it == failures_.end() || it->second.second <= 0) return std::nullopt;
    it->second.second--;
    return it->second.first;
  }

  NodeStore& s_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> calls_;
  std::map<std::string, std::unique_ptr<Gate>> gates_;
  std::map<std::string, std::pair<Error, int>> failures_;
};

inline std::string describe(const std::map<std::string, uint64_t>& calls) {
  std::ostringstream o;
  for (const auto& [name, n] : calls) o << name << " x" << n << " ";
  return o.str();
}

// The engine's options in these cases: no sweep falls due (the test runs
// the batches, or a case sets its own interval).
inline AllocationEngineOptions test_engine_options() {
  AllocationEngineOptions eo;
  eo.interval = 1h;
  return eo;
}

// With `ring`, the conductor and the engine are one conductor among those
// registered in the store (a Membership heartbeating every 50 ms, a
// registration alive for 30 s without one), as several kilnd sharing a
// database are; without, this instance owns everything.
class Harness {
 public:
  explicit Harness(AllocationEngineOptions eo = test_engine_options(), bool ring = false)
      : work_(asio::make_work_guard(io_)), db_(4), box_(SecretBox::Key{7, 7, 7}) {
    char tmpl[] = "/tmp/kiln-engine-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
    REQUIRE(s);
    store_ = std::move(*s);
    REQUIRE(store_->migrate());
    drivers_.add(make_fake_driver(io_.get_executor()));
    ConductorOptions opt;
    opt.default_timeout = 60s;
    opt.timeout_check_interval = 50ms;
    opt.power_sync.interval = 0s;
    if (ring) {
      MembershipOptions m;
      m.host = "engine-test";
      m.api_url = "http://engine-test:8080";
      m.heartbeat_interval = 50ms;
      m.timeout = 30s;
      membership_ = std::make_unique<Membership>(io_, *store_, db_, clock_, m, Logger(LogLevel::kOff));
      opt.membership = eo.membership = membership_.get();
    }
    conductor_ = std::make_unique<Conductor>(io_, *store_, db_, drivers_, box_, clock_, opt, Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
    if (membership_) REQUIRE(sync(membership_->start()));
    REQUIRE(sync(conductor_->start()));

    Profile p;
    p.name = "cpu";
    p.doc = {{"name", "cpu"}, {"plans", {{"quick", nlohmann::json::array()}, {"full", nlohmann::json::array()}}}};
    REQUIRE(store_->create_profile(p));
    Image img;
    img.name = "os";
    img.kind = "os";
    img.format = "raw";
    img.path = dir_ + "/os.img";
    img.state = "ready";
    Result<Image> made = store_->create_image(img);
    REQUIRE(made);
    image_ = made->id;
    Tenant t;
    t.name = "acme";
    t.quotas = {TenantQuota{"cpu", NodeKind::kBaremetal, 1000}};
    REQUIRE(store_->create_tenant(t));

    counting_ = std::make_unique<CountingStores>(*store_);
    engine_ = std::make_unique<AllocationEngine>(io_, AllocationEngineStores{*counting_, *counting_, *counting_}, db_,
                                                 *conductor_, clock_, eo, Logger(LogLevel::kOff));
  }
  ~Harness() {
    engine_->stop();
    store_->set_event_listener([](int64_t) {});
    conductor_->stop();
    if (membership_) membership_->halt();
    work_.reset();
    io_.stop();
    thread_.join();
    db_.stop();
    std::filesystem::remove_all(dir_);
  }

  // Starts the engine's loop, every committed event kicking it (as kilnd
  // wires it). run_pass() is not for a started engine.
  void start() {
    AllocationEngine* engine = engine_.get();
    store_->set_event_listener([engine](int64_t) { engine->kick(); });
    engine_->start();
  }

  // Waits (at most `limit`) until allocation `id` is `want`.
  bool reaches(const std::string& id, AllocationState want, std::chrono::milliseconds limit = 20s) {
    return kiln::testing::wait_until([&] {
      Result<Allocation> a = store_->get_allocation(id, "");
      return a && a->state == want;
    }, limit);
  }

  template <typename T>
  T sync(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future).get();
  }

  // An available fake-driver node of profile cpu.
  std::string pool_node(const std::string& name) {
    Node n;
    n.id = new_uuid();
    n.name = name;
    n.profile = "cpu";
    n.provision_state = ProvisionState::kAvailable;
    n.power_state = PowerState::kOff;
    n.bmc.driver = "fake";
    n.bmc.address = "fake://" + name;
    EventDraft e;
    e.type = "node.created";
    Result<Node> c = store_->create_node(n, e);
    REQUIRE(c);
    return c->id;
  }

  // Claims `count` nodes for a new allocation of acme (as POST /v1/allocations does).
  Allocation allocate(const std::string& name, int64_t count, std::string id = new_uuid()) {
    Allocation a;
    a.id = std::move(id);
    a.name = name;
    a.tenant = "acme";
    a.profile = "cpu";
    a.kind = NodeKind::kBaremetal;
    a.count = count;
    a.image = image_;
    a.state = AllocationState::kPending;
    EventDraft e;
    e.type = "allocation.created";
    e.tenant = "acme";
    e.detail = {{"allocation", a.id}};
    Result<Allocation> made = store_->create_allocation(a, {e}, nullptr);
    REQUIRE(made);
    return *made;
  }

  // Runs batches until every one of `ids` is `want`.
  void settle(const std::vector<std::string>& ids, AllocationState want) {
    for (int i = 0; i < 1000; ++i) {
      sync(engine_->run_pass());
      bool all = true;
      for (const std::string& id : ids) all = all && store_->get_allocation(id, "")->state == want;
      if (all) return;
      std::this_thread::sleep_for(10ms);
    }
    FAIL("allocations never " << to_string(want));
  }

  // Runs batches until one reconciles nothing (the events of the last
  // moves read and judged).
  void quiet() {
    for (int i = 0; i < 100; ++i) {
      uint64_t before = engine_->reconciles();
      sync(engine_->run_pass());
      if (engine_->reconciles() == before) return;
    }
    FAIL("the engine kept reconciling");
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool db_;
  SecretBox box_;
  SystemClock clock_;
  std::string dir_;
  std::unique_ptr<NodeStore> store_;
  DriverRegistry drivers_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<Conductor> conductor_;
  std::unique_ptr<CountingStores> counting_;
  std::unique_ptr<AllocationEngine> engine_;
  std::thread thread_;
  std::string image_;
};

}  // namespace kiln::test
