#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
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
  // Other instances' listeners (see "Listener" in pg_store.h): the server
  // delivers this at COMMIT, and drops it with a rollback.
  Result<pg::Rows> told = conn.exec("SELECT pg_notify('kiln_events', $1)", pg::Params().add(std::to_string(last)));
  if (!told) return told.take_error();
  return last;
}

void PgStore::notify(int64_t seq) {
  std::lock_guard<std::mutex> lock(listener_mu_);
  if (seq <= notified_seq_) return;  // a later commit already announced a higher one
  notified_seq_ = seq;
  if (listener_) listener_(seq);
}

void PgStore::set_event_listener(std::function<void(int64_t)> listener) {
  {
    std::lock_guard<std::mutex> lock(listener_mu_);
    listener_ = std::move(listener);
  }
  std::call_once(listen_started_, [this] {
    if (::pipe2(wake_fd_, O_CLOEXEC | O_NONBLOCK) != 0) {
      // Without the pipe the thread could not be stopped: no thread. Other
      // instances' events are then seen by reading `since` only.
      wake_fd_[0] = wake_fd_[1] = -1;
      return;
    }
    listen_thread_ = std::thread([this] { listen_loop(); });
  });
}

bool PgStore::wait_listen(int fd, std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{wake_fd_[0], POLLIN, 0}, {fd, POLLIN, 0}};
  int n = fd >= 0 ? 2 : 1;
  int ms = static_cast<int>(std::max<int64_t>(0, timeout.count()));
  int r = ::poll(fds, static_cast<nfds_t>(n), ms);
  if (r <= 0) return false;  // timeout, or EINTR: the caller's loop looks again
  return n == 2 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

void PgStore::listen_loop() {
  using Clock = std::chrono::steady_clock;
  std::unique_ptr<pg::Connection> conn;
  Clock::time_point next_poll = Clock::now();
  while (!stopping_) {
    if (!conn) {
      Result<std::unique_ptr<pg::Connection>> c = pg::Connection::open(conninfo_);
      // The name lets an operator (and the tests) tell it in pg_stat_activity.
      if (c && (*c)->exec("SET application_name = 'kiln-events-listener'") && (*c)->exec("LISTEN kiln_events")) {
        conn = std::move(*c);
        next_poll = Clock::now();  // what was committed while we were away
      } else {
        wait_listen(-1, listen_retry_);
        continue;
      }
    }
    // The safety net: the counter is the last committed seq.
    if (Clock::now() >= next_poll) {
      Result<pg::Rows> r = conn->exec("SELECT last_seq FROM event_counter");
      if (r && !r->empty()) notify(r->int64(0, 0));
      if (!r && !conn->healthy()) {
        conn.reset();
        continue;
      }
      next_poll = Clock::now() + event_poll_interval_;
    }
    Result<std::vector<std::string>> got = conn->take_notifications();
    if (!got) {
      conn.reset();  // dropped: open a new one, LISTEN again, poll at once
      continue;
    }
    int64_t highest = 0;
    for (const std::string& payload : *got) {
      int64_t seq = 0;
      std::from_chars(payload.data(), payload.data() + payload.size(), seq);
      highest = std::max(highest, seq);
    }
    if (highest > 0) notify(highest);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_poll - Clock::now());
    wait_listen(conn->socket(), std::max(left, std::chrono::milliseconds(0)));
  }
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
