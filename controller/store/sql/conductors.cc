#include <algorithm>
#include <tuple>
#include <utility>

#include "controller/store/sql/sql_store.h"

namespace kiln {

// SqlStore: conductor registrations (ConductorStore).
//
// Concurrency: each write is one statement or one short transaction on the
// row keyed by the conductor's own id, so conductors never contend for a row
// but at registration, where marking a previous incarnation stopped and
// forgetting old rows touch others' rows: both are plain conditional UPDATE
// and DELETE statements, correct under PostgreSQL's READ COMMITTED whoever
// runs first (and under SQLite's one writer). Tests run several conductors
// on one SQLite file through separate handles; the same rules hold.
//
// Errors: as every store call's; while PostgreSQL is unreachable each of
// these is kUnavailable at once (the pool's, pg_store.h). kNotFound means
// only "no running row": membership (controller/conductor/membership.cc)
// registers again or stops acting on it, so an outage must never read as it.

namespace {

constexpr const char kConductorColumns[] = "id, host, api_url, started_at, last_heartbeat_at, stopped_at";

ConductorRecord read_conductor(const db::Rows& r) {
  ConductorRecord c;
  c.id = r.text(0);
  c.host = r.text(1);
  c.api_url = r.text(2);
  c.started_at = r.int64(3);
  c.last_heartbeat_at = r.int64(4);
  c.stopped_at = r.int64(5);
  return c;
}

// The one conductor row a write ... RETURNING gave (kNotFound with `missing`
// when none), its statement run to the end: outside a transaction SQLite
// commits the write as the statement finishes, so an error committing it is
// reported here instead of being lost when the rows are dropped.
Result<ConductorRecord> returned_conductor(db::Conn& c, std::string_view sql, const db::Binds& binds,
                                           std::string missing) {
  Result<db::Rows> r = c.query(sql, binds);
  if (!r) return r.take_error();
  Result<bool> row = r->next();
  if (!row) return row.take_error();
  if (!*row) return Error(Code::kNotFound, std::move(missing));
  ConductorRecord out = read_conductor(*r);
  for (;;) {
    Result<bool> more = r->next();
    if (!more) return more.take_error();
    if (!*more) return out;
  }
}

}  // namespace

Result<ConductorRecord> SqlStore::register_conductor(const ConductorRecord& c) {
  if (c.id.empty()) return Error::invalid("/id", "is required");
  const int64_t now = now_ms();
  return write_value<ConductorRecord>([&](Tx& tx) -> Result<ConductorRecord> {
    if (Result<int64_t> forget = tx.conn.exec(
            "DELETE FROM conductors WHERE id <> $1 AND ((stopped_at > 0 AND stopped_at < $2) OR last_heartbeat_at < $2)",
            db::Binds().add(c.id).add(now - kForgetConductorAfterMs));
        !forget)
      return forget.take_error();
    // The same host and URL registering under a new id is a restart: its
    // previous incarnation stopped now.
    if (Result<int64_t> previous = tx.conn.exec(
            "UPDATE conductors SET stopped_at = $4 WHERE id <> $1 AND host = $2 AND api_url = $3 AND stopped_at = 0",
            db::Binds().add(c.id).add(c.host).add(c.api_url).add(now));
        !previous)
      return previous.take_error();
    // An id registering again (its row stopped while it could not reach the
    // store) runs again with started_at kept.
    return returned_conductor(
        tx.conn,
        std::string("INSERT INTO conductors (") + kConductorColumns +
            ") VALUES ($1, $2, $3, $4, $4, 0) ON CONFLICT (id) DO UPDATE SET host = excluded.host,"
            " api_url = excluded.api_url, last_heartbeat_at = excluded.last_heartbeat_at, stopped_at = 0"
            " RETURNING " + kConductorColumns,
        db::Binds().add(c.id).add(c.host).add(c.api_url).add(now), "conductor " + c.id + " was not written");
  });
}

Result<ConductorRecord> SqlStore::heartbeat_conductor(std::string_view id) {
  const int64_t now = now_ms();
  return autocommit_value<ConductorRecord>([&](db::Conn& c) {
    return returned_conductor(c,
                              "UPDATE conductors SET last_heartbeat_at = $2 WHERE id = $1 AND stopped_at = 0"
                              " RETURNING " + std::string(kConductorColumns),
                              db::Binds().add(id).add(now),
                              "conductor " + std::string(id) + " is not registered or was stopped");
  });
}

Status SqlStore::stop_conductor(std::string_view id) {
  const int64_t now = now_ms();
  return autocommit([&](db::Conn& c) -> Status {
    // A second stop keeps the first one's time.
    Result<int64_t> n = c.exec(
        "UPDATE conductors SET stopped_at = CASE WHEN stopped_at = 0 THEN $2 ELSE stopped_at END WHERE id = $1",
        db::Binds().add(id).add(now));
    if (!n) return n.take_error();
    if (*n == 0) return Error(Code::kNotFound, "no such conductor: " + std::string(id));
    return ok_status();
  });
}

Result<std::vector<ConductorRecord>> SqlStore::list_conductors() {
  return read_value<std::vector<ConductorRecord>>([&](db::Conn& c) -> Result<std::vector<ConductorRecord>> {
    Result<db::Rows> r = c.query(std::string("SELECT ") + kConductorColumns + " FROM conductors");
    if (!r) return r.take_error();
    Result<std::vector<ConductorRecord>> all = db::collect<ConductorRecord>(*r, read_conductor);
    if (!all) return all.take_error();
    // By started_at, then id in byte order on both engines (conductors.id
    // has the database's collation on PostgreSQL): sorted here.
    std::sort(all->begin(), all->end(), [](const ConductorRecord& a, const ConductorRecord& b) {
      return std::tie(a.started_at, a.id) < std::tie(b.started_at, b.id);
    });
    return all;
  });
}

}  // namespace kiln
