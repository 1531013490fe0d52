#include <algorithm>
#include <utility>

#include "controller/store/pg/pg_store.h"
#include "controller/store/store_rules.h"

namespace kiln {

using json = nlohmann::json;
using store_rules::checked_limit;
using store_rules::json_text;

// PgStore: events and audit (EventLog).

Result<int64_t> PgStore::insert_events(pg::Connection& conn, const std::vector<EventDraft>& events,
                                       const Node* node, const std::string& fallback_tenant) {
  if (events.empty()) return int64_t{0};
  // Taking the numbers locks event_counter's row until this transaction ends:
  // the next writer's numbers follow ours and become visible after ours.
  Result<pg::Rows> counter =
      conn.exec("UPDATE event_counter SET last_seq = last_seq + $1 RETURNING last_seq",
                pg::Params().add(static_cast<int64_t>(events.size())));
  if (!counter) return counter.take_error();
  if (counter->empty()) return Error(Code::kInternal, "store: event_counter has no row");
  const int64_t last = counter->int64(0, 0);
  int64_t seq = last - static_cast<int64_t>(events.size());
  const int64_t ts = now_ms();
  for (const EventDraft& e : events) {
    std::string node_id = e.node_id;
    std::string tenant = e.tenant;
    if (node != nullptr) {
      if (node_id.empty()) node_id = node->id;
      if (tenant.empty()) tenant = node->tenant.empty() ? fallback_tenant : node->tenant;
    }
    Result<pg::Rows> ins = conn.exec(
        "INSERT INTO events (seq, ts, type, node_id, from_state, to_state, request_id, tenant, detail)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        pg::Params()
            .add(++seq)
            .add(ts)
            .add(e.type)
            .add(node_id)
            .add(e.from_state)
            .add(e.to_state)
            .add(e.request_id)
            .add(tenant)
            .add(json_text(e.detail)));
    if (!ins) return ins.take_error();
  }
  return last;
}

void PgStore::notify(int64_t seq) {
  std::lock_guard<std::mutex> lock(listener_mu_);
  if (seq <= notified_seq_) return;  // a later commit already announced a higher one
  notified_seq_ = seq;
  if (listener_) listener_(seq);
}

void PgStore::set_event_listener(std::function<void(int64_t)> listener) {
  std::lock_guard<std::mutex> lock(listener_mu_);
  listener_ = std::move(listener);
}

Status PgStore::append_events(const std::vector<EventDraft>& events) {
  if (events.empty()) return ok_status();
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Transaction> tx = pg::Transaction::begin(l->conn());
  if (!tx) return tx.take_error();
  Result<int64_t> seq = insert_events(l->conn(), events, nullptr, "");
  if (!seq) return seq.take_error();
  if (Status s = tx->commit(); !s) return s;
  notify(*seq);
  return ok_status();
}

Result<std::vector<EventRecord>> PgStore::list_events(int64_t since_seq, int limit,
                                                      std::optional<std::string> node_id,
                                                      std::optional<std::string> tenant) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  pg::Params params;
  params.add(since_seq).add(int64_t{*lim});
  std::string q =
      "SELECT seq, ts, type, node_id, from_state, to_state, request_id, tenant, detail FROM events WHERE seq > $1";
  if (node_id) {
    q += " AND node_id = $" + std::to_string(params.next_index());
    params.add(*node_id);
  }
  if (tenant) {
    q += " AND tenant = $" + std::to_string(params.next_index());
    params.add(*tenant);
  }
  q += " ORDER BY seq LIMIT $2";
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> rows = l->conn().exec(q, params);
  if (!rows) return rows.take_error();
  std::vector<EventRecord> out;
  out.reserve(static_cast<size_t>(rows->size()));
  for (int i = 0; i < rows->size(); ++i) {
    EventRecord e;
    e.seq = rows->int64(i, 0);
    e.ts = rows->int64(i, 1);
    e.type = rows->text(i, 2);
    e.node_id = rows->text(i, 3);
    e.from_state = rows->text(i, 4);
    e.to_state = rows->text(i, 5);
    e.request_id = rows->text(i, 6);
    e.tenant = rows->text(i, 7);
    e.detail = json::parse(rows->text(i, 8), nullptr, /*allow_exceptions=*/false);
    if (e.detail.is_discarded()) return Error(Code::kInternal, "store: corrupt JSON in events.detail");
    out.push_back(std::move(e));
  }
  return out;
}

Result<int64_t> PgStore::last_event_seq() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  // The counter, not max(seq): it is the number of the last committed event.
  Result<pg::Rows> rows = l->conn().exec("SELECT last_seq FROM event_counter");
  if (!rows) return rows.take_error();
  return rows->empty() ? int64_t{0} : rows->int64(0, 0);
}

Status PgStore::append_audit(const AuditRecord& a) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> r = l->conn().exec(
      "INSERT INTO audit (ts, actor, actor_name, role, method, path, request_id, node_id, status)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
      pg::Params()
          .add(a.ts != 0 ? a.ts : now_ms())
          .add(a.actor)
          .add(a.actor_name)
          .add(a.role)
          .add(a.method)
          .add(a.path)
          .add(a.request_id)
          .add(a.node_id)
          .add(a.status));
  if (!r) return r.take_error();
  return ok_status();
}

Result<std::vector<AuditRecord>> PgStore::list_audit(int64_t since_id, int limit) {
  Result<int> lim = checked_limit(limit);
  if (!lim) return lim.take_error();
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Rows> rows = l->conn().exec(
      "SELECT id, ts, actor, actor_name, role, method, path, request_id, node_id, status"
      " FROM audit WHERE id > $1 ORDER BY id LIMIT $2",
      pg::Params().add(since_id).add(int64_t{*lim}));
  if (!rows) return rows.take_error();
  std::vector<AuditRecord> out;
  for (int i = 0; i < rows->size(); ++i) {
    AuditRecord a;
    a.id = rows->int64(i, 0);
    a.ts = rows->int64(i, 1);
    a.actor = rows->text(i, 2);
    a.actor_name = rows->text(i, 3);
    a.role = rows->text(i, 4);
    a.method = rows->text(i, 5);
    a.path = rows->text(i, 6);
    a.request_id = rows->text(i, 7);
    a.node_id = rows->text(i, 8);
    a.status = static_cast<int>(rows->int64(i, 9));
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace kiln
