// Opening and migrating: migrations applied in order and recorded, a second
// migrate() changes nothing, the file is in WAL mode, data survives reopening.
#include <catch2/catch.hpp>

#include "controller/store/migrations.h"
#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("migrations are applied in order and recorded", "[store][migrations]") {
  TempDir dir;
  FakeClock clock(1'234'000);
  SqliteStoreOptions o;
  o.path = dir.file("kiln.db");
  o.clock = &clock;
  auto s = open_sqlite_store(o);
  REQUIRE(s);
  NodeStore& store = **s;

  auto before = store.applied_migrations();
  REQUIRE(before);
  CHECK(before->empty());

  REQUIRE(store.migrate());
  auto applied = store.applied_migrations();
  REQUIRE(applied);
  std::vector<std::string> expected;
  for (const auto& m : store::embedded_migrations()) expected.emplace_back(m.name);
  REQUIRE(!expected.empty());
  CHECK(expected.front() == "001_initial");
  CHECK(*applied == expected);

  CHECK(sql_int(o.path, "SELECT count(*) FROM schema_migrations") == static_cast<int64_t>(expected.size()));
  CHECK(sql_int(o.path, "SELECT min(applied_at) FROM schema_migrations") == 1'234'000);
  for (const char* table : {"nodes", "ports", "events", "audit", "tokens"})
    CHECK(sql_int(o.path, std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") +
                              table + "'") == 1);
  // The indexes the list, lookup and timeout queries rely on.
  for (const char* index : {"nodes_by_created", "nodes_by_name", "nodes_deadline", "nodes_reserved",
                            "ports_by_address", "events_by_node"})
    CHECK(sql_int(o.path, std::string("SELECT count(*) FROM sqlite_master WHERE type='index' AND name='") +
                              index + "'") == 1);
}

TEST_CASE("a second migrate is a no-op", "[store][migrations]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("keep"), event("node.created")));
  auto schema_before = sql_column(f.path, "SELECT sql FROM sqlite_master ORDER BY name");
  auto recorded_before = sql_column(f.path, "SELECT name || '@' || applied_at FROM schema_migrations");

  f.clock.advance_ms(60'000);
  REQUIRE(f.store->migrate());
  CHECK(sql_column(f.path, "SELECT sql FROM sqlite_master ORDER BY name") == schema_before);
  CHECK(sql_column(f.path, "SELECT name || '@' || applied_at FROM schema_migrations") == recorded_before);
  CHECK(f.store->get_node("keep"));

  // And from a fresh process-level open of the same file.
  f.store.reset();
  auto again = open_migrated(f.path, &f.clock);
  CHECK(sql_column(f.path, "SELECT name || '@' || applied_at FROM schema_migrations") == recorded_before);
  CHECK(again->get_node("keep"));
}

TEST_CASE("the database is in WAL mode", "[store][migrations]") {
  StoreFixture f;
  CHECK(sql_text(f.path, "PRAGMA journal_mode") == "wal");
}

TEST_CASE("a path that is not a file is refused", "[store][migrations]") {
  SqliteStoreOptions o;
  o.path = ":memory:";
  auto s = open_sqlite_store(o);
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kInvalidArgument);

  o.path = "/nonexistent-dir-kiln/kiln.db";
  auto t = open_sqlite_store(o);
  REQUIRE_FALSE(t);
  CHECK(t.error().code == Code::kInternal);
}
