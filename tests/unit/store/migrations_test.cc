// Opening and migrating: migrations applied in order and recorded, a second
// migrate() changes nothing, the file is in WAL mode, data survives reopening.
#include <catch2/catch.hpp>

#include <memory>
#include <string_view>

#include "controller/store/migrations.h"
#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// A database at `path` as a release without migration `first_missing` left
// it: every embedded migration before that one applied and recorded.
std::unique_ptr<sql::Database> migrated_before(const std::string& path, std::string_view first_missing) {
  auto db = sql::Database::open(path, {});
  REQUIRE(db);
  REQUIRE((*db)->exec("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY NOT NULL, applied_at INTEGER NOT NULL)"));
  for (const store::Migration& m : store::embedded_migrations()) {
    if (m.name >= first_missing) break;
    REQUIRE((*db)->exec(m.sql));
    REQUIRE((*db)->exec("INSERT INTO schema_migrations VALUES ('" + std::string(m.name) + "', 1)"));
  }
  return std::move(*db);
}

}  // namespace

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

TEST_CASE("upgrading to tenants: names already on tokens and nodes become tenants", "[store][migrations]") {
  TempDir dir;
  const std::string path = dir.file("kiln.db");
  {
    // A database as the release before tenants left it: every migration
    // before 012_tenants applied, a tenant token and a node of another tenant.
    auto db = migrated_before(path, "012");
    REQUIRE(db->exec("INSERT INTO tokens (id, name, role, tenant, secret_hash, created_at) "
                        "VALUES ('t1', 'acme-ci', 'tenant', 'acme', 'h1', 1), ('t2', 'ops', 'operator', '', 'h2', 1)"));
    REQUIRE(db->exec("INSERT INTO nodes (id, kind, provision_state, power_state, tenant, created_at, updated_at, "
                        "version) VALUES ('n1', 'baremetal', 'active', 'on', 'globex', 1, 1, 1)"));
  }
  FakeClock clock(5'000);
  auto store = open_migrated(path, &clock);
  REQUIRE(store);
  auto tenants = store->list_tenants();
  REQUIRE(tenants);
  REQUIRE(tenants->size() == 2);
  CHECK((*tenants)[0].name == "acme");
  CHECK((*tenants)[1].name == "globex");
  CHECK((*tenants)[0].quotas.empty());
  CHECK((*tenants)[0].version == 1);
  auto usage = store->tenant_usage("globex");
  REQUIRE(usage);
  CHECK(usage->at({"", NodeKind::kBaremetal}) == 1);
  // Images registered before are private.
  CHECK(sql_int(path, "SELECT count(*) FROM pragma_table_info('images') WHERE name = 'public' AND dflt_value = '0'") == 1);
}

TEST_CASE("upgrading to member order: members keep the order they read back in", "[store][migrations]") {
  TempDir dir;
  const std::string path = dir.file("kiln.db");
  {
    // A database as the release before 023_member_order left it: one claim's
    // two members share joined_at (rowid, the insertion order, broke the tie),
    // a replacement joined later.
    auto db = migrated_before(path, "023");
    REQUIRE(db->exec("INSERT INTO allocations (id, name, tenant, profile, kind, count, image, ssh_keys, traits, "
                        "state, history, created_at, updated_at, version) VALUES ('a1', 'web', 'acme', 'gpu', "
                        "'baremetal', 2, 'img', '[]', '[]', 'ready', '[]', 1, 1, 1)"));
    REQUIRE(db->exec("INSERT INTO allocation_members (allocation, node_id, status, joined_at) VALUES "
                        "('a1', 'n-zz', 'member', 10), ('a1', 'n-aa', 'left', 10), ('a1', 'n-mm', 'member', 20)"));
  }
  FakeClock clock(5'000);
  auto store = open_migrated(path, &clock);
  REQUIRE(store);
  auto a = store->get_allocation("a1", "");
  REQUIRE(a);
  std::vector<std::string> order;
  for (const AllocationMember& m : a->members) order.push_back(m.node_id);
  CHECK(order == std::vector<std::string>{"n-zz", "n-aa", "n-mm"});
  CHECK(sql_int(path, "SELECT max(ord) FROM allocation_members WHERE allocation = 'a1'") == 3);
}
