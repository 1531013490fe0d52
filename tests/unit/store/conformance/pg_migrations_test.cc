// PostgreSQL only: migrations applied at start-up by several instances at
// once (the advisory lock), and idempotent on every later start-up.
#include <catch2/catch.hpp>

#include <thread>

#include "backends.h"
#include "controller/store/pg/migrations.h"
#include "tests/support/skip.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("postgresql: four instances migrating one empty database at once all succeed, once",
          "[store][postgresql][migrations]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  const std::string conninfo = PostgresBackend::server().create_database("racing_migrations");
  constexpr int kInstances = 4;
  std::vector<std::string> errors(kInstances);
  std::vector<std::thread> starts;
  for (int i = 0; i < kInstances; ++i) {
    starts.emplace_back([&, i] {
      auto c = pg::Connection::open(conninfo);
      if (!c) {
        errors[i] = c.error().message;
        return;
      }
      if (Status s = pg::apply_migrations(**c, 1000 + i); !s) errors[i] = s.error().message;
    });
  }
  for (auto& t : starts) t.join();
  for (int i = 0; i < kInstances; ++i) CHECK(errors[i] == "");

  auto c = pg::Connection::open(conninfo);
  REQUIRE(c);
  auto names = pg::applied_migrations(**c);
  REQUIRE(names);
  CHECK(names->size() == pg::embedded_migrations().size());
  auto rows = (*c)->exec("SELECT count(*), count(DISTINCT name) FROM schema_migrations");
  REQUIRE(rows);
  CHECK(rows->int64(0, 0) == static_cast<int64_t>(pg::embedded_migrations().size()));
  CHECK(rows->int64(0, 1) == rows->int64(0, 0));
  // Later start-ups find nothing to do, and the lock was released.
  REQUIRE(pg::apply_migrations(**c, 2000));
  auto again = pg::applied_migrations(**c);
  REQUIRE(again);
  CHECK(*again == *names);
  auto locks = (*c)->exec("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'");
  REQUIRE(locks);
  CHECK(locks->int64(0, 0) == 0);
}

TEST_CASE("postgresql: errors carry the server's words and map to Kiln codes", "[store][postgresql]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  auto c = pg::Connection::open(PostgresBackend::server().create_database("errors"));
  REQUIRE(c);
  REQUIRE((*c)->exec_script("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT NOT NULL)"));
  REQUIRE((*c)->exec("INSERT INTO t (k, n) VALUES ($1, $2)", pg::Params().add("a").add(int64_t{1})));
  auto dup = (*c)->exec("INSERT INTO t (k, n) VALUES ($1, $2)", pg::Params().add("a").add(int64_t{2}));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == Code::kConflict);
  CHECK(pg::is_unique_violation(dup.error()));
  CHECK(dup.error().message.find("t_pkey") != std::string::npos);
  auto syntax = (*c)->exec("SELEC 1");
  REQUIRE_FALSE(syntax);
  CHECK(syntax.error().code == Code::kInternal);
  CHECK_FALSE(pg::is_unique_violation(syntax.error()));
  // A value with quotes and a NULL travel as parameters, never as SQL text.
  REQUIRE((*c)->exec("INSERT INTO t (k, n) VALUES ($1, $2)", pg::Params().add("o'; DROP TABLE t; --").add(int64_t{3})));
  auto r = (*c)->exec("SELECT k, n, $1::text IS NULL FROM t ORDER BY n", pg::Params().add(std::nullopt));
  REQUIRE(r);
  REQUIRE(r->size() == 2);
  CHECK(r->text(1, 0) == "o'; DROP TABLE t; --");
  CHECK(r->boolean(1, 2));
  {
    // A transaction not committed leaves nothing behind.
    auto tx = pg::Transaction::begin(**c);
    REQUIRE(tx);
    REQUIRE((*c)->exec("DELETE FROM t"));
  }
  auto count = (*c)->exec("SELECT count(*) FROM t");
  REQUIRE(count);
  CHECK(count->int64(0, 0) == 2);

  auto refused = pg::Connection::open("host=/nonexistent-kiln-dir port=1 user=postgres password=hunter2 dbname=x");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Code::kUnavailable);
  CHECK(refused.error().message.find("hunter2") == std::string::npos);  // secrets never in errors
}
