#pragma once
// The stores the conformance suite runs against, one type per backend, each a
// fresh, migrated store with its own fake clock:
//
//   SqliteBackend    a SQLite file in a temporary directory
//   PostgresBackend  a fresh database on a real PostgreSQL server the test
//                    process starts itself (tests/support/postgres_server.h)
//
// Every TEMPLATE_TEST_CASE over KILN_STORE_BACKENDS runs the same checks on
// both, so the two stores cannot drift apart. Where PostgreSQL is not
// installed, the PostgreSQL cases end as skipped (KILN_SKIP), never passed.
//
// The suite covers the aggregates PgStore implements (NodeRepo, EventLog,
// AccessStore, TenantStore, AgentStore, CatalogueStore, ValidationStore,
// HostStore, AllocationStore, ConductorStore); both backends expose them as
// nodes(), events(), access(), tenants(), agent(), catalogue(), validations(),
// hosts(), allocations() and conductors().
//
// The virtual allocation cases reach host rows through add_host / host_rows /
// guest_count (written before PgStore had a HostStore: the SQLite store's
// HostStore and plain SQL on PostgreSQL, the same columns).

#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controller/store/pg/pg_store.h"
#include "controller/store/sql/conn.h"
#include "controller/store/store.h"
#include "tests/support/postgres_server.h"
#include "store_test_util.h"

namespace kiln::test {

// The aggregates a backend's `store` serves, as the cases reach them.
template <typename Store>
struct StoreAccess {
  NodeRepo& nodes() { return *store; }
  EventLog& events() { return *store; }
  AccessStore& access() { return *store; }
  TenantStore& tenants() { return *store; }
  AgentStore& agent() { return *store; }
  CatalogueStore& catalogue() { return *store; }
  ValidationStore& validations() { return *store; }
  HostStore& hosts() { return *store; }
  AllocationStore& allocations() { return *store; }
  ConductorStore& conductors() { return *store; }
  Result<std::vector<std::string>> applied_migrations() { return store->applied_migrations(); }

  std::unique_ptr<Store> store;
};

struct SqliteBackend : StoreAccess<NodeStore> {
  static constexpr const char* kName = "sqlite";
  static constexpr db::Engine kEngine = db::Engine::kSqlite;
  SqliteBackend();
  // The store closes before its directory and clock go (it is in the base).
  ~SqliteBackend() { store.reset(); }
  // Another handle on the same database (a second kilnd sharing it).
  std::unique_ptr<NodeStore> open_another();

  // A hypervisor host row named `name` (status ready); its id.
  std::string add_host(const std::string& name);
  // The reservation rows booked on `host_id`.
  std::vector<HostReservation> host_rows(const std::string& host_id);
  // How many virtual machine rows there are.
  int64_t guest_count();
  // Nothing: SQLite's one writer numbers events in the order it commits them,
  // so there is no window between numbering and commit to widen.
  void delay_event_commits() {}
  // From now on (until allow_usage_writes) every INSERT into or UPDATE of
  // usage_records fails (a trigger), failing the transaction that made it.
  void refuse_usage_writes();
  void allow_usage_writes();
  // Runs `sql` behind the store's back (what another program, or an older
  // kilnd, writes); the first column of its first row as an integer, -1
  // when it returns none.
  int64_t raw_sql(const std::string& sql);
  // How the engine would run `sql` with `params` bound to $1, $2, ...: the
  // lines of EXPLAIN QUERY PLAN ("SCAN t" reads every row of t).
  std::string query_plan(const std::string& sql, const std::vector<std::string>& params);
  // The plan reads every row of `table` (not one found through an index).
  static bool reads_every_row(const std::string& plan, const std::string& table);

  TempDir dir;
  FakeClock clock;
};

struct PostgresBackend : StoreAccess<PgStore> {
  static constexpr const char* kName = "postgresql";
  static constexpr db::Engine kEngine = db::Engine::kPostgres;
  // Skips the test case (KILN_SKIP) when PostgreSQL is not installed.
  PostgresBackend();
  ~PostgresBackend() { store.reset(); }
  // Another PgStore on the same database (a second kilnd sharing it).
  std::unique_ptr<PgStore> open_another();

  // As SqliteBackend's, through plain SQL.
  std::string add_host(const std::string& name);
  std::vector<HostReservation> host_rows(const std::string& host_id);
  int64_t guest_count();
  // From now on every transaction that writes event rows (into events or
  // event_queue, whichever the store uses) pauses 0-4 ms at random after
  // writing them and before it commits (a trigger calling pg_sleep), so that
  // concurrent writers commit in an order unrelated to the order they wrote.
  void delay_event_commits();
  // As SqliteBackend's, through plain SQL.
  void refuse_usage_writes();
  void allow_usage_writes();
  int64_t raw_sql(const std::string& sql);
  // EXPLAIN's lines with sequential scans disabled: the planner then reads a
  // table whole ("Seq Scan on t") only when no index can serve the query, so
  // the plan does not depend on how few rows a test table holds.
  std::string query_plan(const std::string& sql, const std::vector<std::string>& params);
  static bool reads_every_row(const std::string& plan, const std::string& table);

  // The process's one server, started on first use and stopped at exit.
  static testing::PostgresServer& server();

  FakeClock clock;
  std::string conninfo;
};

#define KILN_STORE_BACKENDS ::kiln::test::SqliteBackend, ::kiln::test::PostgresBackend

// `s` in ASCII upper case: ids are UUIDs, which every store matches in any case.
inline std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace kiln::test
