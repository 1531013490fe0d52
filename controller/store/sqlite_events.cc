#include "controller/store/sqlite_store.h"

#include <utility>
#include "controller/store/sqlite_locks.h"
#include "controller/store/sqlite_rows.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rows;

// SqliteStore: events and audit (EventLog).

// ---------------------------------------------------------------------------
// Events

Result<int64_t> SqliteStore::insert_events(const std::vector<EventDraft>& events, const Node* node,
                                           const std::string& fallback_tenant) {
  int64_t max_seq = 0;
  sql::Database& db = *writer_;
  int64_t ts = now_ms();
  for (const EventDraft& e : events) {
    Result<sql::StatementRef> st = db.prepare(
        "INSERT INTO events (ts, type, node_id, from_state, to_state, request_id, tenant, detail)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    if (!st) return st.take_error();
    std::string node_id = e.node_id;
    std::string tenant = e.tenant;
    if (node != nullptr) {
      if (node_id.empty()) node_id = node->id;
      if (tenant.empty()) tenant = node->tenant.empty() ? fallback_tenant : node->tenant;
    }
    (*st)->bind(1, ts)
        .bind(2, e.type)
        .bind(3, node_id)
        .bind(4, e.from_state)
        .bind(5, e.to_state)
        .bind(6, e.request_id)
        .bind(7, tenant)
        .bind(8, json_text(e.detail));
    if (Status s = (*st)->run(); !s) return s.take_error();
    max_seq = std::max(max_seq, db.last_insert_rowid());
  }
  return max_seq;
}

void SqliteStore::notify(int64_t seq) {
  if (seq > 0 && listener_) listener_(seq);
}

void SqliteStore::set_event_listener(std::function<void(int64_t)> listener) {
  std::lock_guard<std::mutex> lock(writer_mu_);
  listener_ = std::move(listener);
}

Result<std::vector<EventRecord>> SqliteStore::list_events(int64_t since_seq, int limit,
                                                          std::optional<std::string> node_id,
                                                          std::optional<std::string> tenant) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  std::string q =
      "SELECT seq, ts, type, node_id, from_state, to_state, request_id, tenant, detail FROM events WHERE seq > ?1";
  if (node_id) q += " AND node_id = ?3";
  if (tenant) q += " AND tenant = ?4";
  q += " ORDER BY seq LIMIT ?2";
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare(q);
  if (!st) return st.take_error();
  (*st)->bind(1, since_seq).bind(2, *lim);
  if (node_id) (*st)->bind(3, *node_id);
  if (tenant) (*st)->bind(4, *tenant);
  return collect<EventRecord>(**st, [](const sql::Statement& s) -> Result<EventRecord> {
    EventRecord e;
    e.seq = s.column_int64(0);
    e.ts = s.column_int64(1);
    e.type = s.column_text(2);
    e.node_id = s.column_text(3);
    e.from_state = s.column_text(4);
    e.to_state = s.column_text(5);
    e.request_id = s.column_text(6);
    e.tenant = s.column_text(7);
    Result<json> d = parse_json_column(s, 8, "events.detail");
    if (!d) return d.take_error();
    e.detail = std::move(*d);
    return e;
  });
}

Result<int64_t> SqliteStore::last_event_seq() {
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare("SELECT ifnull(max(seq), 0) FROM events");
  if (!st) return st.take_error();
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  return (*st)->column_int64(0);
}

// ---------------------------------------------------------------------------
// Audit

Status SqliteStore::append_audit(const AuditRecord& a) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  Result<sql::StatementRef> st = w->db().prepare(
      "INSERT INTO audit (ts, actor, actor_name, role, method, path, request_id, node_id, status)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  if (!st) return st.take_error();
  (*st)->bind(1, a.ts != 0 ? a.ts : now_ms())
      .bind(2, a.actor)
      .bind(3, a.actor_name)
      .bind(4, a.role)
      .bind(5, a.method)
      .bind(6, a.path)
      .bind(7, a.request_id)
      .bind(8, a.node_id)
      .bind(9, a.status);
  return (*st)->run();  // one statement: autocommit is its transaction
}

Result<std::vector<AuditRecord>> SqliteStore::list_audit(int64_t since_id, int limit) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  ReaderLease r = lease_reader();
  Result<sql::StatementRef> st = r.db().prepare(
      "SELECT id, ts, actor, actor_name, role, method, path, request_id, node_id, status"
      " FROM audit WHERE id > ?1 ORDER BY id LIMIT ?2");
  if (!st) return st.take_error();
  (*st)->bind(1, since_id).bind(2, *lim);
  return collect<AuditRecord>(**st, [](const sql::Statement& s) {
    AuditRecord a;
    a.id = s.column_int64(0);
    a.ts = s.column_int64(1);
    a.actor = s.column_text(2);
    a.actor_name = s.column_text(3);
    a.role = s.column_text(4);
    a.method = s.column_text(5);
    a.path = s.column_text(6);
    a.request_id = s.column_text(7);
    a.node_id = s.column_text(8);
    a.status = static_cast<int>(s.column_int64(9));
    return a;
  });
}

}  // namespace kiln
