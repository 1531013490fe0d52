#include "controller/store/sqlite_store.h"

#include <utility>

#include "controller/store/sqlite_rows.h"

namespace kiln {

using namespace store_rows;

// SqliteStore: conductor registrations (ConductorStore). On SQLite one kilnd
// owns the file, but tests run several conductors on one file through
// separate handles, and every write here is one BEGIN IMMEDIATE transaction
// like the rest of the store, so the same rules hold as on PostgreSQL.

namespace {

constexpr const char kConductorColumns[] = "id, host, api_url, started_at, last_heartbeat_at, stopped_at";

ConductorRecord read_conductor(const sql::Statement& s) {
  ConductorRecord c;
  c.id = s.column_text(0);
  c.host = s.column_text(1);
  c.api_url = s.column_text(2);
  c.started_at = s.column_int64(3);
  c.last_heartbeat_at = s.column_int64(4);
  c.stopped_at = s.column_int64(5);
  return c;
}

Result<ConductorRecord> select_conductor(sql::Database& db, std::string_view id) {
  Result<sql::StatementRef> st =
      db.prepare(std::string("SELECT ") + kConductorColumns + " FROM conductors WHERE id = ?1");
  if (!st) return st.take_error();
  (*st)->bind(1, id);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return Error(Code::kNotFound, "no such conductor: " + std::string(id));
  ConductorRecord c = read_conductor(**st);
  (*st)->reset();
  return c;
}

}  // namespace

Result<ConductorRecord> SqliteStore::register_conductor(const ConductorRecord& c) {
  if (c.id.empty()) return Error::invalid("/id", "is required");
  const int64_t now = now_ms();
  ConductorRecord out;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<sql::StatementRef> forget = db.prepare(
        "DELETE FROM conductors WHERE id <> ?1 AND ((stopped_at > 0 AND stopped_at < ?2) OR last_heartbeat_at < ?2)");
    if (!forget) return forget.take_error();
    (*forget)->bind(1, c.id).bind(2, now - kForgetConductorAfterMs);
    if (Status r = (*forget)->run(); !r) return r;
    Result<sql::StatementRef> previous = db.prepare(
        "UPDATE conductors SET stopped_at = ?4 WHERE id <> ?1 AND host = ?2 AND api_url = ?3 AND stopped_at = 0");
    if (!previous) return previous.take_error();
    (*previous)->bind(1, c.id).bind(2, c.host).bind(3, c.api_url).bind(4, now);
    if (Status r = (*previous)->run(); !r) return r;
    Result<sql::StatementRef> ins = db.prepare(
        std::string("INSERT INTO conductors (") + kConductorColumns +
        ") VALUES (?1, ?2, ?3, ?4, ?4, 0) ON CONFLICT (id) DO UPDATE SET host = excluded.host,"
        " api_url = excluded.api_url, last_heartbeat_at = excluded.last_heartbeat_at, stopped_at = 0");
    if (!ins) return ins.take_error();
    (*ins)->bind(1, c.id).bind(2, c.host).bind(3, c.api_url).bind(4, now);
    if (Status r = (*ins)->run(); !r) return r;
    Result<ConductorRecord> row = select_conductor(db, c.id);
    if (!row) return row.take_error();
    out = std::move(*row);
    return tx->commit();
  });
  if (!s) return s.take_error();
  return out;
}

Result<ConductorRecord> SqliteStore::heartbeat_conductor(std::string_view id) {
  const int64_t now = now_ms();
  ConductorRecord out;
  Status s = on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<sql::StatementRef> up =
        db.prepare("UPDATE conductors SET last_heartbeat_at = ?2 WHERE id = ?1 AND stopped_at = 0");
    if (!up) return up.take_error();
    (*up)->bind(1, id).bind(2, now);
    if (Status r = (*up)->run(); !r) return r;
    if (db.changes() == 0) return Error(Code::kNotFound, "conductor " + std::string(id) + " is not registered or was stopped");
    Result<ConductorRecord> row = select_conductor(db, id);
    if (!row) return row.take_error();
    out = std::move(*row);
    return tx->commit();
  });
  if (!s) return s.take_error();
  return out;
}

Status SqliteStore::stop_conductor(std::string_view id) {
  const int64_t now = now_ms();
  return on_writer([&](sql::Database& db) -> Status {
    Result<sql::Transaction> tx = sql::Transaction::begin_immediate(db);
    if (!tx) return tx.take_error();
    Result<sql::StatementRef> up = db.prepare(
        "UPDATE conductors SET stopped_at = CASE WHEN stopped_at = 0 THEN ?2 ELSE stopped_at END WHERE id = ?1");
    if (!up) return up.take_error();
    (*up)->bind(1, id).bind(2, now);
    if (Status r = (*up)->run(); !r) return r;
    if (db.changes() == 0) return Error(Code::kNotFound, "no such conductor: " + std::string(id));
    return tx->commit();
  });
}

Result<std::vector<ConductorRecord>> SqliteStore::list_conductors() {
  std::vector<ConductorRecord> out;
  Status s = on_reader([&](sql::Database& db) -> Status {
    Result<sql::StatementRef> st = db.prepare(std::string("SELECT ") + kConductorColumns +
                                              " FROM conductors ORDER BY started_at, id");
    if (!st) return st.take_error();
    Result<std::vector<ConductorRecord>> rows = collect<ConductorRecord>(**st, read_conductor);
    if (!rows) return rows.take_error();
    out = std::move(*rows);
    return ok_status();
  });
  if (!s) return s.take_error();
  return out;
}

}  // namespace kiln
