#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "controller/store/pg/pg_conn.h"
#include "controller/store/pg/pg_store.h"

namespace kiln {

// PgStore: how events are numbered (event_counter) and announced (NOTIFY, and
// the listening thread that hears other instances'); the EventLog's flows are
// SqlStore's (sql/events.cc).

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
  db::PgConn c(conn);
  Result<int64_t> written =
      insert_event_rows(c, events, node, fallback_tenant, last - static_cast<int64_t>(events.size()) + 1);
  if (!written) return written;
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

}  // namespace kiln
