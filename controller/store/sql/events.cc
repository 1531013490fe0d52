#include <algorithm>
#include <utility>

#include "controller/store/sql/sql_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using store_rules::checked_limit;
using store_rules::json_text;

// SqlStore: events and the audit log (EventLog). How events are numbered and
// announced is the engine's (insert_events: SQLite's AUTOINCREMENT as they are
// appended; PostgreSQL queues them and numbers them after the commit,
// pg/pg_events.cc); the rows are written here.

Result<int64_t> SqlStore::insert_event_rows(db::Conn& conn, EventRows rows, const std::vector<EventDraft>& events,
                                            const Node* node, const std::string& fallback_tenant) {
  // The log's seq is left to SQLite's AUTOINCREMENT (a NULL INTEGER PRIMARY
  // KEY); the queue has no seq yet. Either way the same columns follow.
  const char* insert = rows == EventRows::kLog
                           ? "INSERT INTO events (seq, ts, type, node_id, from_state, to_state, request_id, tenant,"
                             " detail) VALUES (NULL, $1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq"
                           : "INSERT INTO event_queue (ts, type, node_id, from_state, to_state, request_id, tenant,"
                             " detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
  int64_t last = 0;
  const int64_t ts = now_ms();
  for (const EventDraft& e : events) {
    std::string node_id = e.node_id;
    std::string tenant = e.tenant;
    if (node != nullptr) {
      if (node_id.empty()) node_id = node->id;
      if (tenant.empty()) tenant = node->tenant.empty() ? fallback_tenant : node->tenant;
    }
    db::Binds b;
    b.add(ts).add(e.type).add(node_id).add(e.from_state).add(e.to_state).add(e.request_id).add(tenant).add(
        json_text(e.detail));
    if (rows == EventRows::kQueue) {
      Result<int64_t> w = conn.exec(insert, b);
      if (!w) return w.take_error();
      continue;
    }
    Result<int64_t> seq = db::query_int(conn, insert, b);
    if (!seq) return seq.take_error();
    last = std::max(last, *seq);
  }
  return last;
}

Status SqlStore::append_events(const std::vector<EventDraft>& events) {
  if (events.empty()) return ok_status();
  return write([&](Tx& tx) { return append_tx_events(tx, events, nullptr, ""); });
}

Result<std::vector<EventRecord>> SqlStore::list_events(int64_t since_seq, int limit,
                                                       std::optional<std::string> node_id,
                                                       std::optional<std::string> tenant) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  db::Binds b;
  b.add(since_seq).add(int64_t{*lim});
  std::string q =
      "SELECT seq, ts, type, node_id, from_state, to_state, request_id, tenant, detail FROM events WHERE seq > $1";
  if (node_id) {
    q += " AND node_id = $" + std::to_string(b.next());
    b.add(*node_id);
  }
  if (tenant) {
    q += " AND tenant = $" + std::to_string(b.next());
    b.add(*tenant);
  }
  q += " ORDER BY seq LIMIT $2";
  return read_value<std::vector<EventRecord>>([&](db::Conn& c) -> Result<std::vector<EventRecord>> {
    Result<db::Rows> r = c.query(q, b);
    if (!r) return r.take_error();
    return db::collect<EventRecord>(*r, [](const db::Rows& row) -> Result<EventRecord> {
      EventRecord e;
      e.seq = row.int64(0);
      e.ts = row.int64(1);
      e.type = row.text(2);
      e.node_id = row.text(3);
      e.from_state = row.text(4);
      e.to_state = row.text(5);
      e.request_id = row.text(6);
      e.tenant = row.text(7);
      Result<json> detail = db::json_column(row, 8, "events.detail");
      if (!detail) return detail.take_error();
      e.detail = std::move(*detail);
      return e;
    });
  });
}

Result<int64_t> SqlStore::last_event_seq() {
  // The highest committed seq: numbers are given in commit order on both
  // engines (SQLite's one writer; on PostgreSQL one publisher at a time, to
  // events already committed), and events are never deleted.
  return read_value<int64_t>([&](db::Conn& c) { return db::query_int(c, "SELECT coalesce(max(seq), 0) FROM events"); });
}

Status SqlStore::append_audit(const AuditRecord& a) {
  return autocommit([&](db::Conn& c) -> Status {
    Result<int64_t> w = c.exec(
        "INSERT INTO audit (ts, actor, actor_name, role, method, path, request_id, node_id, status)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        db::Binds()
            .add(a.ts != 0 ? a.ts : now_ms())
            .add(a.actor)
            .add(a.actor_name)
            .add(a.role)
            .add(a.method)
            .add(a.path)
            .add(a.request_id)
            .add(a.node_id)
            .add(a.status));
    if (!w) return w.take_error();
    return ok_status();
  });
}

Result<std::vector<AuditRecord>> SqlStore::list_audit(int64_t since_id, int limit) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  return read_value<std::vector<AuditRecord>>([&](db::Conn& c) -> Result<std::vector<AuditRecord>> {
    Result<db::Rows> r = c.query(
        "SELECT id, ts, actor, actor_name, role, method, path, request_id, node_id, status"
        " FROM audit WHERE id > $1 ORDER BY id LIMIT $2",
        db::Binds().add(since_id).add(int64_t{*lim}));
    if (!r) return r.take_error();
    return db::collect<AuditRecord>(*r, [](const db::Rows& row) {
      AuditRecord a;
      a.id = row.int64(0);
      a.ts = row.int64(1);
      a.actor = row.text(2);
      a.actor_name = row.text(3);
      a.role = row.text(4);
      a.method = row.text(5);
      a.path = row.text(6);
      a.request_id = row.text(7);
      a.node_id = row.text(8);
      a.status = static_cast<int>(row.int64(9));
      return a;
    });
  });
}

}  // namespace kiln
