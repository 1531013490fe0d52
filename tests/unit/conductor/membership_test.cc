// Membership's heartbeat keeps the ring it has while the live conductors
// stay the same: an idle kilnd heartbeats every 2 s, and each heartbeat used
// to rebuild the ring (members x 256 points hashed and sorted) although the
// members had not changed (an idle kilnd does no work it already did). The rebuilds are
// counted (membership_stats.h); the views published meanwhile must still
// follow every heartbeat (acting, liveness) and every change of members.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
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

  Membership& add(const std::string& host) {
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db", .clock = &clock_});
    REQUIRE(s);
    REQUIRE((*s)->migrate());
    stores_.push_back(std::move(*s));
    pools_.push_back(std::make_unique<BlockingPool>(1));
    MembershipOptions o;
    o.host = host;
    o.api_url = "http://" + host + ":8080";
    o.heartbeat_interval = 1h;
    o.timeout = 10s;
    members_.push_back(
        std::make_unique<Membership>(io_, *stores_.back(), *pools_.back(), clock_, o, Logger(LogLevel::kOff)));
    REQUIRE(sync(members_.back()->start()));
    return *members_.back();
  }

  template <typename T>
  T sync(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future).get();
  }

 private:
  const Clock& clock_;
  std::string dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
  std::vector<std::unique_ptr<NodeStore>> stores_;
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
