// PostgreSQL only: the event listener of one PgStore is woken by events
// another PgStore (another kilnd sharing the database) commits, through
// LISTEN/NOTIFY, with the latency printed; and the listening connection,
// when the server drops it, comes back and is woken again.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "backends.h"
#include "tests/support/skip.h"

using namespace kiln;
using namespace kiln::test;
using namespace std::chrono_literals;

namespace {

using SteadyClock = std::chrono::steady_clock;

// The highest seq a store's listener was called with, and a way to wait for one.
class Seen {
 public:
  std::function<void(int64_t)> listener() {
    return [this](int64_t seq) {
      std::lock_guard<std::mutex> l(mu_);
      if (seq < highest_) backwards_ = true;
      highest_ = seq;
      at_ = SteadyClock::now();
      cv_.notify_all();
    };
  }
  // When the listener reached `seq`, or nullopt after `timeout`.
  std::optional<SteadyClock::time_point> wait_for(int64_t seq, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, timeout, [&] { return highest_ >= seq; })) return std::nullopt;
    return at_;
  }
  bool went_backwards() {
    std::lock_guard<std::mutex> l(mu_);
    return backwards_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t highest_ = 0;
  bool backwards_ = false;
  SteadyClock::time_point at_;
};

std::unique_ptr<PgStore> open_store(const std::string& conninfo, std::chrono::milliseconds poll) {
  PgStoreOptions o;
  o.conninfo = conninfo;
  o.connections = 2;
  o.event_poll_interval = poll;
  o.listen_retry = 50ms;
  auto s = PgStore::open(o);
  REQUIRE(s);
  return std::move(*s);
}

std::vector<EventDraft> one_event(int i) {
  return {EventDraft{.type = "test.write", .detail = {{"i", i}}}};
}

int64_t pct(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Listening connections of this database, by the name PgStore gives them.
int64_t listeners(const std::string& conninfo) {
  auto c = pg::Connection::open(conninfo);
  REQUIRE(c);
  auto r = (*c)->exec(
      "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'kiln-events-listener'"
      " AND datname = current_database()");
  REQUIRE(r);
  return r->int64(0, 0);
}

}  // namespace

TEST_CASE("postgresql: a write through one instance wakes another instance's event listener (latency printed)",
          "[store][postgresql][events]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  const std::string conninfo = PostgresBackend::server().create_database("listen_latency");
  // The safety-net poll is an hour away: only NOTIFY can wake the listener.
  auto writer = open_store(conninfo, 3600s);
  REQUIRE(writer->migrate());
  auto reader = open_store(conninfo, 3600s);
  Seen seen;
  reader->set_event_listener(seen.listener());
  // Its listening connection is up once it has read the counter (0 here).
  for (int i = 0; i < 200 && listeners(conninfo) < 1; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(listeners(conninfo) == 1);

  constexpr int kWrites = 200;
  std::vector<int64_t> micros;
  for (int i = 0; i < kWrites; ++i) {
    auto t0 = SteadyClock::now();
    REQUIRE(writer->append_events(one_event(i)));
    auto woke = seen.wait_for(i + 1, 5s);
    REQUIRE(woke.has_value());
    micros.push_back(std::chrono::duration_cast<std::chrono::microseconds>(*woke - t0).count());
  }
  CHECK_FALSE(seen.went_backwards());
  int64_t median = pct(micros, 0.5), p99 = pct(micros, 0.99), worst = pct(micros, 1.0);
  std::printf("pg listen/notify: %d writes via one instance, another instance's listener woken after "
              "(append_events start -> listener) median %lld us, p99 %lld us, max %lld us\n",
              kWrites, static_cast<long long>(median), static_cast<long long>(p99), static_cast<long long>(worst));
  std::fflush(stdout);
  // NOTIFY, not the hour-long poll; generous bounds for a loaded machine.
  CHECK(p99 < 1'000'000);

  // A batch written by several threads at once: the listener ends at the
  // last seq, never going backwards.
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) CHECK(writer->append_events(one_event(1000 * t + i)));
    });
  for (auto& t : ts) t.join();
  CHECK(seen.wait_for(kWrites + 100, 5s).has_value());
  CHECK_FALSE(seen.went_backwards());
}

TEST_CASE("postgresql: a dropped listening connection is opened again and listens again",
          "[store][postgresql][events]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  const std::string conninfo = PostgresBackend::server().create_database("listen_dropped");
  auto writer = open_store(conninfo, 3600s);
  REQUIRE(writer->migrate());
  auto reader = open_store(conninfo, 3600s);
  Seen seen;
  reader->set_event_listener(seen.listener());
  for (int i = 0; i < 200 && listeners(conninfo) < 1; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(listeners(conninfo) == 1);
  REQUIRE(writer->append_events(one_event(1)));
  REQUIRE(seen.wait_for(1, 5s).has_value());

  auto admin = pg::Connection::open(conninfo);
  REQUIRE(admin);
  auto pid_of = [&]() -> std::string {
    auto r = (*admin)->exec(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'kiln-events-listener'"
        " AND datname = current_database()");
    REQUIRE(r);
    return r->empty() ? std::string() : r->text(0, 0);
  };
  const std::string before = pid_of();
  REQUIRE(before != "");
  auto killed = (*admin)->exec("SELECT pg_terminate_backend($1::int)", pg::Params().add(before));
  REQUIRE(killed);

  // A write while it is down is not lost: reconnecting reads the counter.
  REQUIRE(writer->append_events(one_event(2)));
  CHECK(seen.wait_for(2, 10s).has_value());
  // And it LISTENs again: a new backend, woken by NOTIFY (the poll is an hour away).
  std::string after;
  for (int i = 0; i < 500; ++i) {
    after = pid_of();
    if (after != "" && after != before) break;
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(after != "");
  CHECK(after != before);
  REQUIRE(writer->append_events(one_event(3)));
  CHECK(seen.wait_for(3, 5s).has_value());
  CHECK_FALSE(seen.went_backwards());
}

TEST_CASE("postgresql: the listener's safety-net poll finds events even without notifications",
          "[store][postgresql][events]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  const std::string conninfo = PostgresBackend::server().create_database("listen_poll");
  auto writer = open_store(conninfo, 3600s);
  REQUIRE(writer->migrate());
  auto reader = open_store(conninfo, 100ms);
  Seen seen;
  reader->set_event_listener(seen.listener());
  // An event committed without NOTIFY (as a lost notification would look):
  // only the poll of the counter can find it.
  auto c = pg::Connection::open(conninfo);
  REQUIRE(c);
  REQUIRE((*c)->exec_script(
      "BEGIN; UPDATE event_counter SET last_seq = last_seq + 1;"
      " INSERT INTO events (seq, ts, type, node_id, from_state, to_state, request_id, tenant, detail)"
      " SELECT last_seq, 0, 'test.silent', '', '', '', '', '', '{}' FROM event_counter; COMMIT;"));
  CHECK(seen.wait_for(1, 5s).has_value());
}

TEST_CASE("postgresql: events a writer queued but never published (it died after its commit) are published by "
          "the listener's poll, before the events of later writers",
          "[store][postgresql][events]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  const std::string conninfo = PostgresBackend::server().create_database("listen_orphans");
  auto writer = open_store(conninfo, 3600s);
  REQUIRE(writer->migrate());
  auto reader = open_store(conninfo, 100ms);
  // A writer's committed transaction whose publish never ran.
  auto c = pg::Connection::open(conninfo);
  REQUIRE(c);
  REQUIRE((*c)->exec_script("INSERT INTO event_queue (ts, type) VALUES (1, 'test.orphan-1'), (2, 'test.orphan-2')"));
  auto none = reader->list_events(0, 10, std::nullopt, std::nullopt);
  REQUIRE(none);
  CHECK(none->empty());  // not numbered yet, so no reader sees them

  Seen seen;
  reader->set_event_listener(seen.listener());
  CHECK(seen.wait_for(2, 5s).has_value());
  auto published = reader->list_events(0, 10, std::nullopt, std::nullopt);
  REQUIRE(published);
  REQUIRE(published->size() == 2);
  CHECK(published->at(0).type == "test.orphan-1");
  CHECK(published->at(1).seq == 2);

  // Left queued again; this time the next writer's publish takes them, ahead
  // of its own events, which it then announces.
  REQUIRE((*c)->exec_script("INSERT INTO event_queue (ts, type) VALUES (3, 'test.orphan-3')"));
  REQUIRE(writer->append_events(one_event(4)));
  auto all = writer->list_events(2, 10, std::nullopt, std::nullopt);
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK(all->at(0).type == "test.orphan-3");
  CHECK(all->at(1).type == "test.write");
  CHECK(*writer->last_event_seq() == 4);
  CHECK_FALSE(seen.went_backwards());
}
