// PostgreSQL only: pg::Connection prepares each statement text once per
// connection and keeps it (bounded, least recently used given up first),
// and a session that lost its statements prepares them again. Read from the
// server's own view of the session (pg_prepared_statements), not from the
// connection's bookkeeping alone.
#include <catch2/catch.hpp>

#include <string>

#include "backends.h"
#include "tests/support/skip.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::unique_ptr<pg::Connection> connect(const std::string& conninfo) {
  auto c = pg::Connection::open(conninfo);
  REQUIRE(c);
  return std::move(*c);
}

// How many statements the server keeps for this session whose text is `sql`
// (an empty `sql`: all of them). Asked through the same connection, so the
// question itself is one of the statements it keeps.
int64_t server_prepared(pg::Connection& c, const std::string& sql = "") {
  auto r = sql.empty() ? c.exec("SELECT count(*) FROM pg_prepared_statements")
                       : c.exec("SELECT count(*) FROM pg_prepared_statements WHERE statement = $1",
                                pg::Params().add(sql));
  REQUIRE(r);
  return r->int64(0, 0);
}

const std::string kSum = "SELECT $1::bigint + $2::bigint";

int64_t sum(pg::Connection& c, int64_t a, int64_t b) {
  auto r = c.exec(kSum, pg::Params().add(a).add(b));
  REQUIRE(r);
  return r->int64(0, 0);
}

}  // namespace

TEST_CASE("postgresql: a statement text is prepared once per connection and every later call only runs it",
          "[store][postgresql]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  auto c = connect(PostgresBackend::server().create_database("prepared_once"));
  for (int i = 0; i < 20; ++i) CHECK(sum(*c, i, 1000) == i + 1000);
  CHECK(server_prepared(*c, kSum) == 1);
  // The sum and the two counting questions: nothing else was prepared.
  CHECK(server_prepared(*c) == 3);
  CHECK(c->prepared_count() == 3);

  // A text the server refuses is an error naming the statement, and is not kept.
  auto bad = c->exec("SELEC 1");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("syntax error") != std::string::npos);
  CHECK(bad.error().message.find("(in: SELEC 1)") != std::string::npos);
  CHECK(c->prepared_count() == 3);
  // A statement that fails when run (not when prepared) stays prepared and
  // runs again with other values.
  const std::string divide = "SELECT 10 / $1::int";
  auto zero = c->exec(divide, pg::Params().add(0));
  REQUIRE_FALSE(zero);
  CHECK(zero.error().message.find("division by zero") != std::string::npos);
  auto five = c->exec(divide, pg::Params().add(2));
  REQUIRE(five);
  CHECK(five->int64(0, 0) == 5);
  CHECK(server_prepared(*c, divide) == 1);
}

TEST_CASE("postgresql: a connection keeps at most kMaxPrepared statements, giving up the least recently used",
          "[store][postgresql]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  auto c = connect(PostgresBackend::server().create_database("prepared_bound"));
  const std::size_t total = pg::Connection::kMaxPrepared + 40;
  auto text = [](std::size_t i) { return "SELECT $1::bigint + " + std::to_string(i); };
  for (std::size_t i = 0; i < total; ++i) {
    auto r = c->exec(text(i), pg::Params().add(int64_t{1}));
    REQUIRE(r);
    CHECK(r->int64(0, 0) == static_cast<int64_t>(i) + 1);
    CHECK(sum(*c, 2, 3) == 5);  // the hot one, used between every other
  }
  CHECK(c->prepared_count() == pg::Connection::kMaxPrepared);
  // The server holds what the connection keeps, no more: the evicted ones
  // were deallocated (the counting question is one of those kept).
  CHECK(server_prepared(*c) == static_cast<int64_t>(pg::Connection::kMaxPrepared));
  CHECK(server_prepared(*c, kSum) == 1);
  CHECK(server_prepared(*c, text(0)) == 0);
  CHECK(server_prepared(*c, text(total - 1)) == 1);
  // An evicted text is prepared again on its next use.
  auto again = c->exec(text(0), pg::Params().add(int64_t{1}));
  REQUIRE(again);
  CHECK(again->int64(0, 0) == 1);
}

TEST_CASE("postgresql: a session that lost its prepared statements prepares them again",
          "[store][postgresql]") {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  // Catch runs the case once per section: one database for all of them.
  static const std::string conninfo = PostgresBackend::server().create_database("prepared_lost");
  auto c = connect(conninfo);
  CHECK(sum(*c, 1, 2) == 3);

  SECTION("dropped outside a transaction (a pooler's DISCARD ALL): the call is made again at once") {
    REQUIRE(c->exec_script("DISCARD ALL"));
    CHECK(sum(*c, 4, 5) == 9);
    CHECK(server_prepared(*c, kSum) == 1);
  }

  SECTION("dropped inside a transaction: the call fails, the transaction ends, the next call prepares again") {
    auto txn = pg::Transaction::begin(*c);
    REQUIRE(txn);
    REQUIRE(c->exec_script("DEALLOCATE ALL"));
    auto lost = c->exec(kSum, pg::Params().add(int64_t{1}).add(int64_t{1}));
    REQUIRE_FALSE(lost);
    CHECK(lost.error().message.find("[SQLSTATE 26000]") != std::string::npos);
    CHECK(c->prepared_count() == 0);
  }

  SECTION("the backend was terminated: reconnect() starts a session with nothing prepared") {
    auto admin = connect(conninfo);
    auto pid = c->exec("SELECT pg_backend_pid()");
    REQUIRE(pid);
    REQUIRE(admin->exec("SELECT pg_terminate_backend($1::int)", pg::Params().add(pid->text(0, 0))));
    auto gone = c->exec(kSum, pg::Params().add(int64_t{1}).add(int64_t{1}));
    REQUIRE_FALSE(gone);
    CHECK(gone.error().code == Code::kUnavailable);
    REQUIRE(c->reconnect());
    CHECK(c->prepared_count() == 0);
  }
  CHECK(sum(*c, 20, 22) == 42);
  CHECK(server_prepared(*c, kSum) == 1);
}
