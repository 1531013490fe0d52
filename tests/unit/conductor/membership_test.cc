// Membership's heartbeat keeps the ring it has while the live conductors
// stay the same: an idle kilnd heartbeats every 2 s, and each heartbeat used
// to rebuild the ring (members x 256 points hashed and sorted) although the
// members had not changed (an idle kilnd does no work it already did). The rebuilds are
// counted (membership_stats.h); the views published meanwhile must still
// follow every heartbeat (acting, liveness) and every change of members.
//
// Alone (sole, SQLite), a conductor acts and is alive whatever its
// heartbeat's age, so its heartbeat can be rare; among peers a heartbeat
// older than the timeout still stops it acting. And a refresh called while
// another runs waits for it and reads again: its caller sees the rows as
// they were when it called (tests step time that way).
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "controller/conductor/membership.h"
#include "controller/conductor/membership_stats.h"
#include "controller/store/store.h"

using namespace kiln;
using namespace std::chrono_literals;

namespace {

// One membership's conductor rows, as a store that can be away: heartbeats
// refused (every other call goes through), or held inside the store until
// released (a refresh caught in the middle). Calls come from the membership's
// pool thread; the switches from the test's.
class ConductorRows : public ConductorStore {
 public:
  explicit ConductorRows(ConductorStore& real) : real_(real) {}

  void refuse_heartbeats(bool on) { refusing_ = on; }
  // Holds the heartbeats that come in the store until release().
  void hold_heartbeats() {
    std::lock_guard<std::mutex> l(mu_);
    holding_ = true;
    held_ = false;
  }
  // Returns once a heartbeat is held.
  void wait_held() {
    std::unique_lock<std::mutex> l(mu_);
    REQUIRE(cv_.wait_for(l, 10s, [&] { return held_; }));
  }
  void release() {
    std::lock_guard<std::mutex> l(mu_);
    holding_ = false;
    cv_.notify_all();
  }

  Result<ConductorRecord> register_conductor(const ConductorRecord& c) override { return real_.register_conductor(c); }
  Result<ConductorRecord> heartbeat_conductor(std::string_view id) override {
    if (refusing_) return Error(Code::kUnavailable, "the store is away");
    {
      std::unique_lock<std::mutex> l(mu_);
      held_ = holding_;
      cv_.notify_all();
      // Bounded, so a failed test does not leave the pool's thread parked.
      cv_.wait_for(l, 30s, [&] { return !holding_; });
    }
    return real_.heartbeat_conductor(id);
  }
  Status stop_conductor(std::string_view id) override { return real_.stop_conductor(id); }
  Result<std::vector<ConductorRecord>> list_conductors() override { return real_.list_conductors(); }

 private:
  ConductorStore& real_;
  std::atomic<bool> refusing_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool holding_ = false;
  bool held_ = false;
};

// Memberships on one SQLite file (a store handle and pool each, as separate
// kilnd would have), on an io_context run by one thread. Their loops never
// fire on their own (heartbeat every hour): the test steps every refresh.
class Members {
 public:
  explicit Members(const Clock& clock) : clock_(clock), work_(asio::make_work_guard(io_)) {
    char tmpl[] = "/tmp/kiln-membership-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Members() {
    work_.reset();
    io_.stop();
    thread_.join();
    for (auto& m : members_) m.reset();
    for (auto& p : pools_) p->stop();
    std::filesystem::remove_all(dir_);
  }

  Membership& add(const std::string& host, bool sole = false) {
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db", .clock = &clock_});
    REQUIRE(s);
    REQUIRE((*s)->migrate());
    stores_.push_back(std::move(*s));
    rows_.push_back(std::make_unique<ConductorRows>(*stores_.back()));
    pools_.push_back(std::make_unique<BlockingPool>(1));
    MembershipOptions o;
    o.host = host;
    o.api_url = "http://" + host + ":8080";
    o.heartbeat_interval = 1h;
    o.timeout = 10s;
    o.sole = sole;
    members_.push_back(
        std::make_unique<Membership>(io_, *rows_.back(), *pools_.back(), clock_, o, Logger(LogLevel::kOff)));
    REQUIRE(sync(members_.back()->start()));
    return *members_.back();
  }

  // The rows the `i`th membership added reads and writes through.
  ConductorRows& rows(std::size_t i) { return *rows_.at(i); }
  // The registration of `id` as the store has it now.
  ConductorRecord row(const std::string& id) {
    auto all = stores_.front()->list_conductors();
    REQUIRE(all);
    for (const ConductorRecord& r : *all)
      if (r.id == id) return r;
    FAIL("no registration " << id);
    return {};
  }
  NodeStore& store() { return *stores_.front(); }

  template <typename T>
  T sync(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future).get();
  }
  asio::io_context& io() { return io_; }

 private:
  const Clock& clock_;
  std::string dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::vector<std::unique_ptr<NodeStore>> stores_;
  std::vector<std::unique_ptr<ConductorRows>> rows_;
  std::vector<std::unique_ptr<BlockingPool>> pools_;
  std::vector<std::unique_ptr<Membership>> members_;
};

}  // namespace

TEST_CASE("membership: a heartbeat that sees the same live conductors keeps its ring - a change of members rebuilds it") {
  FakeClock clock;
  Members ms(clock);
  const uint64_t at_begin = membership_ring_builds();
  Membership& a = ms.add("host-a");
  CHECK(membership_ring_builds() == at_begin + 1);  // the first view: a alone
  const std::string node = "00000000-0000-4000-8000-000000000001";
  CHECK(a.view()->owner_of(node) == a.id());

  // Idle: ten heartbeats, 2 s apart, as the loop makes them. The ring stays;
  // each view still carries its heartbeat (acting long after the timeout
  // since the first one).
  const uint64_t alone = membership_ring_builds();
  for (int i = 0; i < 10; ++i) {
    clock.advance_ms(2000);
    ms.sync(a.refresh());
    CHECK(a.view()->acting());
    CHECK(a.view()->is_mine(node));
  }
  CHECK(membership_ring_builds() == alone);

  // b joins: its own first view, then a's next refresh sees two members.
  Membership& b = ms.add("host-b");
  CHECK(membership_ring_builds() == alone + 1);
  ms.sync(a.refresh());
  CHECK(membership_ring_builds() == alone + 2);
  CHECK(a.view()->ring().members().size() == 2);
  const uint64_t two = membership_ring_builds();
  for (int i = 0; i < 5; ++i) {
    clock.advance_ms(2000);
    ms.sync(a.refresh());
    ms.sync(b.refresh());
  }
  CHECK(membership_ring_builds() == two);
  // The kept rings still agree on every owner, and split the nodes.
  int mine_a = 0;
  for (int i = 0; i < 100; ++i) {
    const std::string n = "00000000-0000-4000-8000-" + std::to_string(100000000000 + i);
    CHECK(a.view()->owner_of(n) == b.view()->owner_of(n));
    CHECK(a.view()->is_mine(n) != b.view()->is_mine(n));
    mine_a += a.view()->is_mine(n);
  }
  CHECK(mine_a > 10);
  CHECK(mine_a < 90);

  // b goes silent: alive until the timeout (same ring), then gone (a new one).
  clock.advance_ms(6000);
  ms.sync(a.refresh());
  CHECK(a.view()->is_alive(b.id()));
  CHECK(membership_ring_builds() == two);
  clock.advance_ms(5000);
  ms.sync(a.refresh());
  CHECK_FALSE(a.view()->is_alive(b.id()));
  CHECK(membership_ring_builds() == two + 1);
  CHECK(a.view()->ring().members() == std::vector<std::string>{a.id()});
  CHECK(a.view()->is_mine(node));

  // b's heartbeat goes through again: back on the ring.
  ms.sync(b.refresh());
  ms.sync(a.refresh());
  CHECK(a.view()->is_alive(b.id()));
  CHECK(a.view()->ring().members().size() == 2);
  // b saw both alive all along (its own view is unchanged); a's ring is new.
  CHECK(membership_ring_builds() == two + 2);
}

TEST_CASE("membership: the heartbeat is 2 s among peers and a minute alone, unless set") {
  MembershipOptions o;
  CHECK(o.heartbeat() == 2s);
  o.sole = true;
  CHECK(o.heartbeat() == 60s);
  o.heartbeat_interval = 100ms;  // an operator's --heartbeat-interval-ms
  CHECK(o.heartbeat() == 100ms);
  o.sole = false;
  CHECK(o.heartbeat() == 100ms);
}

TEST_CASE("membership: alone (sole), a stale heartbeat still acts and is alive - among peers it stops acting at the timeout") {
  const std::string node = "00000000-0000-4000-8000-000000000001";
  FakeClock clock;

  SECTION("alone") {
    Members ms(clock);
    Membership& a = ms.add("host-a", /*sole=*/true);
    REQUIRE(a.view()->acting());
    // The store refuses every heartbeat for a minute, six timeouts: a's own
    // row goes stale, and every refresh re-reads it so.
    ms.rows(0).refuse_heartbeats(true);
    for (int i = 0; i < 6; ++i) {
      clock.advance_ms(10000);
      ms.sync(a.refresh());
      CHECK(a.view()->acting());
      CHECK(a.view()->is_mine(node));
      CHECK(a.view()->is_alive(a.id()));  // GET /v1/conductors: alive
      CHECK(a.view()->ring().members() == std::vector<std::string>{a.id()});
    }
    CHECK(clock.now_ms() - ms.row(a.id()).last_heartbeat_at >= 60000);
    // Between refreshes too: the view judged now does not age out.
    clock.advance_ms(3600 * 1000);
    CHECK(a.view()->acting());
    CHECK(a.view()->is_mine(node));

    // A registration stopped by someone else (a second kilnd on the
    // database, against the data directory's lock) still ends acting for good.
    ms.rows(0).refuse_heartbeats(false);
    REQUIRE(ms.store().stop_conductor(a.id()));
    ms.sync(a.refresh());
    CHECK_FALSE(a.view()->acting());
    CHECK_FALSE(a.view()->is_mine(node));
    CHECK_FALSE(a.view()->is_alive(a.id()));
    ms.sync(a.refresh());
    CHECK_FALSE(a.view()->acting());
  }

  SECTION("among peers") {
    Members ms(clock);
    Membership& a = ms.add("host-a");
    REQUIRE(a.view()->acting());
    ms.rows(0).refuse_heartbeats(true);
    clock.advance_ms(10000);
    ms.sync(a.refresh());
    CHECK(a.view()->acting());  // exactly the timeout: still within it
    CHECK(a.view()->is_alive(a.id()));
    clock.advance_ms(1);
    CHECK_FALSE(a.view()->acting());
    CHECK_FALSE(a.view()->is_mine(node));
    ms.sync(a.refresh());
    CHECK_FALSE(a.view()->acting());
    CHECK_FALSE(a.view()->is_alive(a.id()));  // as the others count it
    CHECK(a.view()->ring().members().empty());
    // A heartbeat that goes through again: acting, on the ring.
    ms.rows(0).refuse_heartbeats(false);
    ms.sync(a.refresh());
    CHECK(a.view()->acting());
    CHECK(a.view()->is_mine(node));
  }
}

TEST_CASE("membership: a refresh called while another runs waits for it and reads the rows again") {
  FakeClock clock;
  Members ms(clock);
  Membership& a = ms.add("host-a");
  // The loop's refresh (here started by hand) is inside its heartbeat.
  ms.rows(0).hold_heartbeats();
  std::future<void> running = asio::co_spawn(ms.io(), a.refresh(), asio::use_future);
  ms.rows(0).wait_held();
  // Meanwhile b registers, and the test asks a for a view that shows it.
  Membership& b = ms.add("host-b");
  std::future<void> mine = asio::co_spawn(ms.io(), a.refresh(), asio::use_future);
  // It cannot end while the other is held (it would have read nothing yet).
  CHECK(mine.wait_for(200ms) == std::future_status::timeout);
  ms.rows(0).release();
  running.get();
  mine.get();
  CHECK(a.view()->is_alive(b.id()));
  CHECK(a.view()->ring().members().size() == 2);
}
