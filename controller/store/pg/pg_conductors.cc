#include <utility>

#include "controller/store/pg/pg_store.h"

namespace kiln {

// PgStore: conductor registrations (ConductorStore), as sqlite_conductors.cc.
//
// Concurrency: each write is one statement or one short transaction on a
// row keyed by the conductor's own id, so instances never contend for a row
// but at registration, where marking a previous incarnation stopped and
// forgetting old rows touch others' rows: both are plain conditional UPDATE
// and DELETE statements, correct under READ COMMITTED whoever runs first.

namespace {

constexpr const char kConductorSelect[] =
    "SELECT id, host, api_url, started_at, last_heartbeat_at, stopped_at FROM conductors";

ConductorRecord read_conductor(const pg::Rows& r, int row) {
  ConductorRecord c;
  c.id = r.text(row, 0);
  c.host = r.text(row, 1);
  c.api_url = r.text(row, 2);
  c.started_at = r.int64(row, 3);
  c.last_heartbeat_at = r.int64(row, 4);
  c.stopped_at = r.int64(row, 5);
  return c;
}

}  // namespace

Result<ConductorRecord> PgStore::register_conductor(const ConductorRecord& c) {
  if (c.id.empty()) return Error::invalid("/id", "is required");
  const int64_t now = now_ms();
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  pg::Connection& conn = l->conn();
  Result<pg::Transaction> tx = pg::Transaction::begin(conn);
  if (!tx) return tx.take_error();
  if (Result<pg::Rows> d = conn.exec(
          "DELETE FROM conductors WHERE id <> $1 AND ((stopped_at > 0 AND stopped_at < $2) OR last_heartbeat_at < $2)",
          pg::Params().add(c.id).add(now - kForgetConductorAfterMs));
      !d)
    return d.take_error();
  if (Result<pg::Rows> u = conn.exec(
          "UPDATE conductors SET stopped_at = $4 WHERE id <> $1 AND host = $2 AND api_url = $3 AND stopped_at = 0",
          pg::Params().add(c.id).add(c.host).add(c.api_url).add(now));
      !u)
    return u.take_error();
  Result<pg::Rows> ins = conn.exec(
      "INSERT INTO conductors (id, host, api_url, started_at, last_heartbeat_at, stopped_at)"
      " VALUES ($1, $2, $3, $4, $4, 0) ON CONFLICT (id) DO UPDATE SET host = excluded.host,"
      " api_url = excluded.api_url, last_heartbeat_at = excluded.last_heartbeat_at, stopped_at = 0"
      " RETURNING id, host, api_url, started_at, last_heartbeat_at, stopped_at",
      pg::Params().add(c.id).add(c.host).add(c.api_url).add(now));
  if (!ins) return ins.take_error();
  ConductorRecord out = read_conductor(*ins, 0);
  if (Status s = tx->commit(); !s) return s.take_error();
  return out;
}

Result<ConductorRecord> PgStore::heartbeat_conductor(std::string_view id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "UPDATE conductors SET last_heartbeat_at = $2 WHERE id = $1 AND stopped_at = 0"
      " RETURNING id, host, api_url, started_at, last_heartbeat_at, stopped_at",
      pg::Params().add(id).add(now_ms()));
  if (!r) return r.take_error();
  if (r->empty()) return Error(Code::kNotFound, "conductor " + std::string(id) + " is not registered or was stopped");
  return read_conductor(*r, 0);
}

Status PgStore::stop_conductor(std::string_view id) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "UPDATE conductors SET stopped_at = CASE WHEN stopped_at = 0 THEN $2 ELSE stopped_at END WHERE id = $1",
      pg::Params().add(id).add(now_ms()));
  if (!r) return r.take_error();
  if (r->affected() == 0) return Error(Code::kNotFound, "no such conductor: " + std::string(id));
  return ok_status();
}

Result<std::vector<ConductorRecord>> PgStore::list_conductors() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(std::string(kConductorSelect) + " ORDER BY started_at, id COLLATE \"C\"");
  if (!r) return r.take_error();
  std::vector<ConductorRecord> out;
  out.reserve(static_cast<std::size_t>(r->size()));
  for (int i = 0; i < r->size(); ++i) out.push_back(read_conductor(*r, i));
  return out;
}

}  // namespace kiln
