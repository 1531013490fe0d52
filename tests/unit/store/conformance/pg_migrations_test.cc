// PostgreSQL only: migrations applied at start-up by several instances at
// once (the advisory lock), and idempotent on every later start-up.
#include <catch2/catch.hpp>

#include <thread>

#include "backends.h"
#include "controller/store/pg/migrations.h"
#include "controller/store/pg/pg_store.h"
#include "tests/support/skip.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// A connection to a database at the schema a release without
// `first_missing` (and every later migration) left it, for the upgrade cases.
std::unique_ptr<pg::Connection> pg_migrated_before(const std::string& conninfo, std::string_view first_missing) {
  auto c = pg::Connection::open(conninfo);
  REQUIRE(c);
  REQUIRE((*c)->exec_script("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY NOT NULL, "
                            "applied_at BIGINT NOT NULL, ord BIGINT GENERATED ALWAYS AS IDENTITY)"));
  for (const store::Migration& m : pg::embedded_migrations()) {
    if (m.name >= first_missing) break;
    INFO(m.name);
    REQUIRE((*c)->exec_script(std::string(m.sql)));
    REQUIRE((*c)->exec("INSERT INTO schema_migrations (name, applied_at) VALUES ($1, 1)", pg::Params().add(m.name)));
  }
  return std::move(*c);
}

// The store on `conninfo` (one connection, `clock`), with every migration
// applied: the upgrade itself.
std::unique_ptr<PgStore> upgraded_store(const std::string& conninfo, FakeClock& clock) {
  PgStoreOptions opt;
  opt.conninfo = conninfo;
  opt.connections = 1;
  opt.clock = &clock;
  auto store = PgStore::open(opt);
  REQUIRE(store);
  REQUIRE((*store)->migrate());
  return std::move(*store);
}

}  // namespace

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

TEST_CASE("postgresql: upgrading to member order numbers existing members in the order they read back",
          "[store][postgresql][migrations]") {
  // As migrations_test's SQLite case: a database as the release before
  // 023_member_order left it. There, two members of one claim share
  // joined_at and PostgreSQL broke the tie by the node's created_at, then id;
  // 023 must keep that order in `ord`.
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  const std::string conninfo = PostgresBackend::server().create_database("member_order_upgrade");
  {
    auto c = pg_migrated_before(conninfo, "023");
    // n-zz was created before n-aa: it was claimed first and reads first.
    REQUIRE(c->exec_script(
        "INSERT INTO nodes (id, name, kind, provision_state, power_state, created_at, updated_at, version) VALUES "
        "('n-zz', 'zz', 'baremetal', 'active', 'on', 1, 1, 1), ('n-aa', 'aa', 'baremetal', 'active', 'on', 2, 2, 1), "
        "('n-mm', 'mm', 'baremetal', 'active', 'on', 3, 3, 1);"
        "INSERT INTO allocations (id, name, tenant, profile, kind, count, image, ssh_keys, traits, state, history, "
        "created_at, updated_at, version) VALUES ('a1', 'web', 'acme', 'gpu', 'baremetal', 2, 'img', '[]', '[]', "
        "'ready', '[]', 1, 1, 1);"
        "INSERT INTO allocation_members (allocation, node_id, status, joined_at) VALUES "
        "('a1', 'n-aa', 'left', 10), ('a1', 'n-mm', 'member', 20), ('a1', 'n-zz', 'member', 10);"));
  }
  FakeClock clock(5'000);
  std::unique_ptr<PgStore> store = upgraded_store(conninfo, clock);
  auto a = store->get_allocation("a1", "");
  REQUIRE(a);
  std::vector<std::string> order;
  for (const AllocationMember& m : a->members) order.push_back(m.node_id);
  CHECK(order == std::vector<std::string>{"n-zz", "n-aa", "n-mm"});
  auto c = pg::Connection::open(conninfo);
  REQUIRE(c);
  auto ords = (*c)->exec("SELECT node_id, ord FROM allocation_members ORDER BY ord");
  REQUIRE(ords);
  REQUIRE(ords->size() == 3);
  CHECK(ords->text(0, 0) == "n-zz");
  CHECK(ords->int64(0, 1) == 1);
  CHECK(ords->text(2, 0) == "n-mm");
  CHECK(ords->int64(2, 1) == 3);
}

TEST_CASE("postgresql: upgrading to the event queue continues the event numbers already taken",
          "[store][postgresql][migrations]") {
  // A database as the release before 024_event_queue left it: three events,
  // numbered from event_counter inside their transactions. Events appended
  // after the upgrade are published from the same counter: 4, 5, 6.
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  const std::string conninfo = PostgresBackend::server().create_database("event_queue_upgrade");
  {
    auto c = pg_migrated_before(conninfo, "024");
    REQUIRE(c->exec_script(
        "INSERT INTO events (seq, ts, type) VALUES (1, 1, 'old.one'), (2, 2, 'old.two'), (3, 3, 'old.three');"
        "UPDATE event_counter SET last_seq = 3"));
  }
  FakeClock clock(5'000);
  std::unique_ptr<PgStore> store = upgraded_store(conninfo, clock);
  REQUIRE(store->append_events({EventDraft{.type = "new.one"}, EventDraft{.type = "new.two"}}));
  REQUIRE(store->create_node(make_node("after"), EventDraft{.type = "node.created"}));
  auto all = store->list_events(0, 10, std::nullopt, std::nullopt);
  REQUIRE(all);
  std::vector<std::string> types;
  for (size_t i = 0; i < all->size(); ++i) {
    CHECK(all->at(i).seq == static_cast<int64_t>(i) + 1);
    types.push_back(all->at(i).type);
  }
  CHECK(types == std::vector<std::string>{"old.one", "old.two", "old.three", "new.one", "new.two", "node.created"});
  CHECK(*store->last_event_seq() == 6);
}
