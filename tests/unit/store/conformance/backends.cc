#include "backends.h"

#include <atomic>
#include <memory>
#include <sqlite3.h>
#include <catch2/catch.hpp>

#include "common/ids.h"
#include "controller/store/pg/connection.h"
#include "tests/support/skip.h"

namespace kiln::test {

SqliteBackend::SqliteBackend() { store = open_migrated(dir.file("kiln.db"), &clock); }

std::unique_ptr<NodeStore> SqliteBackend::open_another() { return open_migrated(dir.file("kiln.db"), &clock); }

std::string SqliteBackend::add_host(const std::string& name) {
  Host h;
  h.name = name;
  h.uri = "test:///" + name;
  h.status = "ready";
  Result<Host> made = store->create_host(h);
  if (!made) FAIL("create_host: " << made.error().message);
  return made->id;
}

std::vector<HostReservation> SqliteBackend::host_rows(const std::string& host_id) {
  Result<std::vector<HostReservation>> r = store->host_reservations(host_id);
  if (!r) FAIL("host_reservations: " << r.error().message);
  return *r;
}

int64_t SqliteBackend::guest_count() {
  Result<std::vector<VirtualMachine>> r = store->list_virtual_machines("");
  if (!r) FAIL("list_virtual_machines: " << r.error().message);
  return static_cast<int64_t>(r->size());
}

void SqliteBackend::refuse_usage_writes() {
  for (const char* op : {"INSERT", "UPDATE"})
    sql_int(dir.file("kiln.db"), std::string("CREATE TRIGGER test_refuse_usage_") + op + " BEFORE " + op +
                                     " ON usage_records BEGIN SELECT RAISE(ABORT, 'usage refused by the test'); END");
}

void SqliteBackend::allow_usage_writes() {
  for (const char* op : {"INSERT", "UPDATE"})
    sql_int(dir.file("kiln.db"), std::string("DROP TRIGGER test_refuse_usage_") + op);
}

int64_t SqliteBackend::raw_sql(const std::string& sql) { return sql_int(dir.file("kiln.db"), sql); }

std::string SqliteBackend::query_plan(const std::string& sql, const std::vector<std::string>& params) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(dir.file("kiln.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    FAIL("open: " << sqlite3_errmsg(db));
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> closing(db, sqlite3_close);
  sqlite3_stmt* st = nullptr;
  const std::string explain = "EXPLAIN QUERY PLAN " + sql;
  if (sqlite3_prepare_v2(db, explain.c_str(), -1, &st, nullptr) != SQLITE_OK) FAIL(sql << ": " << sqlite3_errmsg(db));
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> finalizing(st, sqlite3_finalize);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const int at = sqlite3_bind_parameter_index(st, ("$" + std::to_string(i + 1)).c_str());
    if (at == 0) FAIL(sql << ": no parameter $" << i + 1);
    sqlite3_bind_text(st, at, params[i].c_str(), -1, SQLITE_TRANSIENT);
  }
  std::string plan;
  while (sqlite3_step(st) == SQLITE_ROW) plan += reinterpret_cast<const char*>(sqlite3_column_text(st, 3)) + std::string("\n");
  return plan;
}

bool SqliteBackend::reads_every_row(const std::string& plan, const std::string& table) {
  // "SCAN t", "SCAN t USING [COVERING] INDEX i": every row, or every entry
  // of an index; "SEARCH t USING ..." is a lookup.
  const std::string scan = "SCAN " + table;
  for (std::size_t at = plan.find(scan); at != std::string::npos; at = plan.find(scan, at + 1)) {
    const std::size_t end = at + scan.size();
    if ((at == 0 || plan[at - 1] == '\n') && (end == plan.size() || plan[end] == '\n' || plan[end] == ' ')) return true;
  }
  return false;
}

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

namespace {
pg::Rows pg_exec(const std::string& conninfo, const std::string& sql, const pg::Params& p = {}) {
  Result<std::unique_ptr<pg::Connection>> c = pg::Connection::open(conninfo);
  if (!c) FAIL("connect: " << c.error().message);
  Result<pg::Rows> r = (*c)->exec(sql, p);
  if (!r) FAIL(sql << ": " << r.error().message);
  return std::move(*r);
}
}  // namespace

std::string PostgresBackend::add_host(const std::string& name) {
  std::string id = new_uuid();
  pg_exec(conninfo,
          "INSERT INTO hosts (id, name, uri, status, created_at, updated_at) VALUES ($1, $2, $3, 'ready', $4, $4)",
          pg::Params().add(id).add(name).add("test:///" + name).add(clock.now_ms()));
  return id;
}

std::vector<HostReservation> PostgresBackend::host_rows(const std::string& host_id) {
  pg::Rows r = pg_exec(conninfo,
                       "SELECT host_id, node_id, kind, item, amount FROM host_reservations WHERE host_id = $1"
                       " ORDER BY kind COLLATE \"C\", item COLLATE \"C\"",
                       pg::Params().add(host_id));
  std::vector<HostReservation> out;
  for (int i = 0; i < r.size(); ++i)
    out.push_back(HostReservation{r.text(i, 0), r.text(i, 1), r.text(i, 2), r.text(i, 3), r.int64(i, 4)});
  return out;
}

int64_t PostgresBackend::guest_count() { return pg_exec(conninfo, "SELECT count(*) FROM virtual_machines").int64(0, 0); }

void PostgresBackend::delay_event_commits() {
  pg_exec(conninfo,
          "CREATE FUNCTION test_delay_commit() RETURNS trigger LANGUAGE plpgsql AS"
          " $$ BEGIN PERFORM pg_sleep(random() * 0.004); RETURN NULL; END $$");
  for (const char* table : {"events", "event_queue"})
    pg_exec(conninfo, std::string("CREATE TRIGGER test_delay_commit AFTER INSERT ON ") + table +
                          " FOR EACH STATEMENT EXECUTE FUNCTION test_delay_commit()");
}

void PostgresBackend::refuse_usage_writes() {
  pg_exec(conninfo,
          "CREATE FUNCTION test_refuse_usage() RETURNS trigger LANGUAGE plpgsql AS"
          " $$ BEGIN RAISE EXCEPTION 'usage refused by the test'; END $$");
  pg_exec(conninfo,
          "CREATE TRIGGER test_refuse_usage BEFORE INSERT OR UPDATE ON usage_records"
          " FOR EACH ROW EXECUTE FUNCTION test_refuse_usage()");
}

void PostgresBackend::allow_usage_writes() {
  pg_exec(conninfo, "DROP TRIGGER test_refuse_usage ON usage_records");
  pg_exec(conninfo, "DROP FUNCTION test_refuse_usage()");
}

int64_t PostgresBackend::raw_sql(const std::string& sql) {
  pg::Rows r = pg_exec(conninfo, sql);
  return r.size() > 0 && !r.is_null(0, 0) ? r.int64(0, 0) : -1;
}

std::string PostgresBackend::query_plan(const std::string& sql, const std::vector<std::string>& params) {
  Result<std::unique_ptr<pg::Connection>> c = pg::Connection::open(conninfo);
  if (!c) FAIL("connect: " << c.error().message);
  if (Result<pg::Rows> off = (*c)->exec("SET enable_seqscan = off", {}); !off) FAIL(off.error().message);
  pg::Params p;
  for (const std::string& v : params) p.add(v);
  Result<pg::Rows> r = (*c)->exec("EXPLAIN " + sql, p);
  if (!r) FAIL(sql << ": " << r.error().message);
  std::string plan;
  for (int i = 0; i < r->size(); ++i) plan += r->text(i, 0) + "\n";
  return plan;
}

bool PostgresBackend::reads_every_row(const std::string& plan, const std::string& table) {
  return plan.find("Seq Scan on " + table + " ") != std::string::npos ||
         plan.find("Seq Scan on " + table + "\n") != std::string::npos;
}

}  // namespace kiln::test
