#include "backends.h"

#include <atomic>
#include <catch2/catch.hpp>

#include "tests/support/skip.h"

namespace kiln::test {

SqliteBackend::SqliteBackend() { store = open_migrated(dir.file("kiln.db"), &clock); }

std::unique_ptr<NodeStore> SqliteBackend::open_another() { return open_migrated(dir.file("kiln.db"), &clock); }

testing::PostgresServer& PostgresBackend::server() {
  static testing::PostgresServer s;
  return s;
}

namespace {
std::unique_ptr<PgStore> open_pg(const std::string& conninfo, const Clock* clock) {
  PgStoreOptions o;
  o.conninfo = conninfo;
  o.clock = clock;
  o.connections = 8;  // the concurrency cases run up to 8 writers
  Result<std::unique_ptr<PgStore>> s = PgStore::open(o);
  if (!s) FAIL("PgStore::open: " << s.error().message);
  return std::move(*s);
}
}  // namespace

PostgresBackend::PostgresBackend() {
  if (auto missing = testing::PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  static std::atomic<int> next{0};
  conninfo = server().create_database("conformance_" + std::to_string(next++));
  store = open_pg(conninfo, &clock);
  Status m = store->migrate();
  if (!m) FAIL("migrate: " << m.error().message);
}

std::unique_ptr<PgStore> PostgresBackend::open_another() { return open_pg(conninfo, &clock); }

}  // namespace kiln::test
