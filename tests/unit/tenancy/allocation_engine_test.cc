// The allocation engine against a real SQLite store, the real conductor and
// fake-driver nodes, driven batch by batch with run_pass() (the engine is
// never start()ed), its store calls counted on the way through: a batch
// reads only the allocations its events name, with one store call however
// many there are, and reconciles only those that changed; and billing starts
// at the ready time, written with the move to ready.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>

#include "common/ids.h"
#include "controller/conductor/conductor.h"
#include "controller/model/allocation_states.h"
#include "controller/store/store.h"
#include "controller/tenancy/allocation_engine.h"
#include "drivers/fake/fake_driver.h"

using namespace kiln;
using namespace std::chrono_literals;

namespace {

// The three aggregates the engine uses, passed through to a real store, each
// call counted by name.
class CountingStores final : public AllocationStore, public EventLog, public CatalogueStore {
 public:
  explicit CountingStores(NodeStore& s) : s_(s) {}

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
  Result<std::vector<Allocation>> list_allocations(const AllocationFilter& f) override {
    count("list_allocations");
    return s_.list_allocations(f);
  }
  Result<std::vector<Allocation>> allocations_in_flight() override {
    count("allocations_in_flight");
    return s_.allocations_in_flight();
  }
  Result<AllocationsWithNodes> in_flight_with_nodes(const std::optional<AllocationScope>& scope) override {
    count("in_flight_with_nodes");
    return s_.in_flight_with_nodes(scope);
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
    return s_.update_allocation_with_usage(id, m, e);
  }
  Result<Allocation> leave_member(std::string_view id, std::string_view node, MemberStatus st, const std::string& r,
                                  bool replace, const std::vector<EventDraft>& e,
                                  const VirtualNodeMaker* v) override {
    count("leave_member");
    return s_.leave_member(id, node, st, r, replace, e, v);
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

  NodeStore& s_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> calls_;
};

std::string describe(const std::map<std::string, uint64_t>& calls) {
  std::ostringstream o;
  for (const auto& [name, n] : calls) o << name << " x" << n << " ";
  return o.str();
}

class Harness {
 public:
  Harness() : work_(asio::make_work_guard(io_)), db_(4), box_(SecretBox::Key{7, 7, 7}) {
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
    conductor_ = std::make_unique<Conductor>(io_, *store_, db_, drivers_, box_, clock_, opt, Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
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
    AllocationEngineOptions eo;
    eo.interval = 1h;  // the test runs the batches; no sweep falls due
    engine_ = std::make_unique<AllocationEngine>(io_, AllocationEngineStores{*counting_, *counting_, *counting_}, db_,
                                                 *conductor_, clock_, eo, Logger(LogLevel::kOff));
  }
  ~Harness() {
    engine_->stop();
    conductor_->stop();
    work_.reset();
    io_.stop();
    thread_.join();
    db_.stop();
    std::filesystem::remove_all(dir_);
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
  Allocation allocate(const std::string& name, int64_t count) {
    Allocation a;
    a.id = new_uuid();
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
  std::unique_ptr<Conductor> conductor_;
  std::unique_ptr<CountingStores> counting_;
  std::unique_ptr<AllocationEngine> engine_;
  std::thread thread_;
  std::string image_;
};

}  // namespace

TEST_CASE("allocation engine: after one member's event a batch reconciles that allocation alone, in two store calls",
          "[allocations][engine]") {
  // Before, every kick read and reconciled every allocation in flight, its
  // members' nodes one store call each: here K allocations, K reconciles and
  // 1 + 2K store calls for one node's event.
  constexpr int kAllocations = 12;
  Harness h;
  for (int i = 0; i < kAllocations * 2; ++i) h.pool_node("n" + std::to_string(i));
  std::vector<std::string> ids;
  for (int i = 0; i < kAllocations; ++i) ids.push_back(h.allocate("a" + std::to_string(i), 2).id);
  h.settle(ids, AllocationState::kReady);
  h.quiet();

  // Nothing happened: one call (the events since the last batch), nothing
  // reconciled.
  h.counting_->reset();
  uint64_t before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  CHECK(h.engine_->reconciles() == before);
  CHECK(h.counting_->calls() == std::map<std::string, uint64_t>{{"list_events", 1}});

  // One member of one allocation changes (with its event): put in
  // maintenance, which an active member serves through.
  Allocation target = *h.store_->get_allocation(ids[5], "");
  const std::string member = target.members.at(1).node_id;
  EventDraft touched;
  touched.type = "node.maintenance";
  REQUIRE(h.store_->update_node_if(member, {}, [](Node& n) {
    n.maintenance = true;
    n.maintenance_reason = "firmware";
    return ok_status();
  }, {touched}));
  h.counting_->reset();
  before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  INFO(describe(h.counting_->calls()));
  CHECK(h.engine_->reconciles() == before + 1);
  // The events, then that allocation and its members' nodes in one call; its
  // reconcile finds every member serving and writes nothing.
  CHECK(h.counting_->total() <= 2);
  CHECK(h.counting_->calls() == std::map<std::string, uint64_t>{{"list_events", 1}, {"in_flight_with_nodes", 1}});
  CHECK(h.store_->get_allocation(ids[5], "")->state == AllocationState::kReady);

  // The same event read again changes nothing: nothing more is reconciled.
  h.counting_->reset();
  before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  CHECK(h.engine_->reconciles() == before);
  CHECK(h.counting_->calls() == std::map<std::string, uint64_t>{{"list_events", 1}});

  // A change to a member that nothing the engine judges depends on (its
  // Ironic fields) is read, but not reconciled.
  EventDraft edited;
  edited.type = "node.updated";
  REQUIRE(h.store_->update_node_if(member, {}, [](Node& n) {
    n.ironic["extra"] = {{"rack", "r7"}};
    return ok_status();
  }, {edited}));
  h.counting_->reset();
  before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  CHECK(h.engine_->reconciles() == before);
  CHECK(h.counting_->total() <= 2);
}

TEST_CASE("allocation engine: a member that fails is replaced, and only its allocation is touched",
          "[allocations][engine]") {
  Harness h;
  for (int i = 0; i < 7; ++i) h.pool_node("n" + std::to_string(i));
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(h.allocate("a" + std::to_string(i), 2).id);
  h.settle(ids, AllocationState::kReady);
  h.quiet();

  // One member fails: the engine replaces it from the pool (the seventh
  // node) and the allocation is ready again.
  Allocation target = *h.store_->get_allocation(ids[1], "");
  const std::string failed = target.members.at(0).node_id;
  EventDraft e;
  e.type = "provision.transition";
  REQUIRE(h.store_->update_node_if(failed, {}, [](Node& n) {
    n.provision_state = ProvisionState::kDeployFailed;
    n.last_error = "disk gone";
    return ok_status();
  }, {e}));
  const uint64_t before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  CHECK(h.engine_->reconciles() == before + 1);
  h.settle({ids[1]}, AllocationState::kReady);
  Allocation after = *h.store_->get_allocation(ids[1], "");
  CHECK(after.replacements == 1);
  std::set<std::string> serving;
  for (const AllocationMember& m : after.members)
    if (m.status == MemberStatus::kMember) serving.insert(m.node_id);
  CHECK(serving.size() == 2);
  CHECK_FALSE(serving.contains(failed));
  // The others never moved.
  for (const std::string& id : {ids[0], ids[2]}) {
    Allocation other = *h.store_->get_allocation(id, "");
    CHECK(other.replacements == 0);
    CHECK(other.history.size() == 2);  // provisioning, ready
  }
  CHECK(h.store_->get_node(failed)->allocation.empty());
}

TEST_CASE("allocation engine: every member is billed from the moment the allocation became ready",
          "[allocations][engine][usage]") {
  // The rows open in the move to ready's own transaction (AllocationStore::
  // update_allocation_with_usage), so no kill -9 between the two can leave a
  // ready allocation unbilled; their start is the ready time.
  Harness h;
  for (int i = 0; i < 3; ++i) h.pool_node("n" + std::to_string(i));
  std::string id = h.allocate("web", 3).id;
  h.settle({id}, AllocationState::kReady);
  Allocation a = *h.store_->get_allocation(id, "");
  REQUIRE(a.ready_at > 0);
  REQUIRE_FALSE(a.history.empty());
  CHECK(a.history.back().to == "ready");
  CHECK(a.history.back().at == a.ready_at);
  Result<std::vector<UsageRecord>> rows = h.store_->list_usage(UsageFilter{std::nullopt, id, 0, 0});
  REQUIRE(rows);
  REQUIRE(rows->size() == 3);
  std::set<std::string> billed;
  for (const UsageRecord& u : *rows) {
    CHECK(u.started_at == a.ready_at);
    CHECK_FALSE(u.ended_at);
    billed.insert(u.node_id);
  }
  std::set<std::string> members;
  for (const AllocationMember& m : a.members) members.insert(m.node_id);
  CHECK(billed == members);
  // The ready move and the opening of the rows were one store call.
  CHECK(h.counting_->calls().count("open_usage") == 0);

  // Released: the rows close at the release, in its transaction.
  Result<Allocation> released = h.sync(h.engine_->release(id, "done", "test", ""));
  REQUIRE(released);
  CHECK(released->state == AllocationState::kReleasing);
  rows = h.store_->list_usage(UsageFilter{std::nullopt, id, 0, 0});
  REQUIRE(rows);
  for (const UsageRecord& u : *rows) CHECK(u.ended_at == released->history.back().at);
  h.settle({id}, AllocationState::kReleased);
  CHECK(h.counting_->calls().count("close_usage") == 0);
}
