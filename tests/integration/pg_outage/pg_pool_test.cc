// PgStore's connection pool through what a database outage does to it, on a
// real PostgreSQL server the test starts: backends terminated under idle
// pooled connections (as a restart or pg_terminate_backend leaves them), and
// the server stopped and started again.
#include <catch2/catch.hpp>

#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/pg/pg_store.h"
#include "tests/support/postgres_server.h"
#include "tests/support/skip.h"

using namespace kiln;
using namespace kiln::testing;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<PgStore> open_store(const std::string& conninfo, int connections) {
  PgStoreOptions o;
  o.conninfo = conninfo;
  o.connections = connections;
  o.reconnect_backoff = 200ms;
  o.reconnect_backoff_max = 1000ms;
  auto s = PgStore::open(o);
  INFO((s ? std::string() : s.error().message));
  REQUIRE(s);
  REQUIRE((*s)->migrate());
  return std::move(*s);
}

// Terminates every other backend of database `db`; how many.
int terminate_backends(const PostgresServer& pg, const std::string& db) {
  PGconn* c = PQconnectdb(pg.conninfo().c_str());
  REQUIRE(PQstatus(c) == CONNECTION_OK);
  PGresult* r = PQexec(c, ("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '" + db +
                           "' AND pid <> pg_backend_pid()")
                              .c_str());
  REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
  int n = std::stoi(PQgetvalue(r, 0, 0));
  PQclear(r);
  PQfinish(c);
  return n;
}

// Calls from `threads` threads at once, `each` calls per thread; the errors.
std::vector<std::string> hammer(PgStore& store, int threads, int each) {
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < each; ++i) {
        Result<std::vector<EventRecord>> r = store.list_events(0, 10, std::nullopt, std::nullopt);
        if (!r) {
          std::lock_guard<std::mutex> l(mu);
          errors.push_back(r.error().message);
        }
      }
    });
  for (auto& t : ts) t.join();
  return errors;
}

}  // namespace

TEST_CASE("pg pool: connections whose backends were terminated while idle are re-established before they are lent") {
  if (auto missing = PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  PostgresServer pg;
  const std::string conninfo = pg.create_database("pool");
  auto store = open_store(conninfo, 4);
  REQUIRE(hammer(*store, 4, 20).empty());
  // Twice: the second time under connections the pool re-established.
  for (int round = 0; round < 2; ++round) {
    REQUIRE(terminate_backends(pg, "pool") >= 4);
    // Let the server's FATAL notices and EOFs reach the idle sockets.
    std::this_thread::sleep_for(200ms);
    std::vector<std::string> errors = hammer(*store, 4, 20);
    INFO("round " << round << ": " << errors.size() << " calls failed, the first: "
                  << (errors.empty() ? "" : errors.front()));
    CHECK(errors.empty());
  }
}

TEST_CASE("pg pool: while the server is down every call fails at once, reconnecting backs off, recovery by itself") {
  if (auto missing = PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  PostgresServer pg;
  const std::string conninfo = pg.create_database("pool");
  auto store = open_store(conninfo, 2);
  REQUIRE(store->last_event_seq());
  REQUIRE(store->register_conductor({"c-1", "host-1", "http://host-1:8080", 0, 0, 0}));
  pg.stop("fast");
  // The first call tries to reconnect and fails; those within the back-off
  // do not try again and say so; all are kUnavailable, none waits.
  const auto from = std::chrono::steady_clock::now();
  int gated = 0;
  for (int i = 0; i < 50; ++i) {
    Result<int64_t> r = store->last_event_seq();
    REQUIRE(!r);
    CHECK(r.error().code == Code::kUnavailable);
    // The message reaches API callers (a 503's detail): never where the
    // database lives.
    CHECK(r.error().message.find(pg.socket_dir()) == std::string::npos);
    gated += r.error().message.find("not retried for") != std::string::npos ? 1 : 0;
  }
  CHECK(std::chrono::steady_clock::now() - from < 2s);
  CHECK(gated >= 45);
  // Membership reads kNotFound from a heartbeat as "our row is gone" (it
  // registers again, or stops acting): an outage must read as kUnavailable.
  CHECK(store->heartbeat_conductor("c-1").error().code == Code::kUnavailable);
  CHECK(store->register_conductor({"c-1", "host-1", "http://host-1:8080", 0, 0, 0}).error().code ==
        Code::kUnavailable);
  CHECK(store->list_conductors().error().code == Code::kUnavailable);
  CHECK(store->stop_conductor("c-1").error().code == Code::kUnavailable);
  CHECK(store->get_tenant("acme").error().code == Code::kUnavailable);
  pg.start();
  // Back within the longest back-off (1 s here) and a margin.
  const auto up = std::chrono::steady_clock::now();
  bool back = false;
  while (!back && std::chrono::steady_clock::now() - up < 5s) {
    back = static_cast<bool>(store->last_event_seq());
    if (!back) std::this_thread::sleep_for(50ms);
  }
  CHECK(back);
  CHECK(std::chrono::steady_clock::now() - up < 2500ms);
  CHECK(store->heartbeat_conductor("c-1"));
  CHECK(hammer(*store, 2, 10).empty());
}
