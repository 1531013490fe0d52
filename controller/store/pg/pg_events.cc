#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "controller/store/pg/pg_store.h"

namespace kiln {

// PgStore: how events are numbered and announced (NOTIFY, and the listening
// thread that hears other instances').
//
// What a reader of `events since S` is promised, on one kilnd or several
// sharing the database: events in seq order; never an event with a seq
// below one it already saw (no gap filled later); every seq from 1 up, none
// lost to a rolled-back writer; NOTIFY kiln_events when new ones commit.
//
// The first design took the numbers from event_counter's row inside the
// writing transaction. The row stayed locked until that COMMIT had waited
// for its WAL flush, so every writer of every instance committed one at a
// time, and three kilnd created nodes no faster than one.
//
// A SEQUENCE does not block, but its numbers commit out of order: writer A
// takes 7, writer B takes 8 and commits, a reader sees 8, then A commits 7
// behind it, and a follower paging by `seq > 8` never sees 7. A reader would
// need a horizon, the lowest number some in-flight writer holds, and
// PostgreSQL cannot show another session that number before its holder
// commits: the rows are invisible, and the xid functions
// (pg_current_snapshot, pg_visible_in_snapshot) tell which transactions are
// running, not which numbers they hold. Writers would have to announce their
// claims outside their transaction (advisory locks keyed by the number, read
// through pg_locks under a gate so a number and its lock appear together),
// every read of the feed would pay for that scan, and a writer rolled back
// after nextval would leave a hole for ever in a log that has promised none
// (docs/operations.md, migrate-store, the soak's events-gap-free check).
//
// So events are numbered after the commit instead. insert_events appends
// them to event_queue in the writer's transaction (still atomic with the
// change they describe); after the COMMIT, write() calls
// kiln_publish_events() (schemas/sql/postgresql/024_event_queue.sql), which
// under one advisory lock numbers every committed queued event in queue
// order from event_counter, moves it into `events`, NOTIFYs, and commits.
// Publishers run one at a time and each commits before the next numbers, so
// the rows of `events` become visible in seq order and without holes, as
// before; readers, last_event_seq() and event_counter are unchanged. Only
// publishing is serialized, and one publish takes everything committed so
// far: writers that commit together (group commit) share one publishing
// commit, and a writer whose events another publisher took only waits for
// that commit. The price was a second commit per writing call, with its own
// WAL flush, and an event that becomes visible a moment after the change it
// describes (still before the store call returns). So a writer first tries
// the lock itself, as its last statement before COMMIT
// (kiln_publish_events_in_writer(), 027_publish_in_writer.sql): when no
// publisher is at work it publishes in its own transaction, its events and
// everything committed before them, visible with its change at its one
// commit; when the lock is busy it commits and publishes after, as above.
// Inside a writer the lock is only tried, never waited for, so writers still
// never wait for each other. tests/unit/store/conformance/
// events_order_conformance_test.cc holds readers to the promise under
// writers whose commits are delayed at random.

Result<int64_t> PgStore::insert_events(db::Conn& conn, const std::vector<EventDraft>& events, const Node* node,
                                       const std::string& fallback_tenant) {
  // Numbered by write() after the commit.
  return insert_event_rows(conn, EventRows::kQueue, events, node, fallback_tenant);
}

namespace {

// The value of `SELECT <function>()`, a seq or NULL.
Result<std::optional<int64_t>> select_seq(pg::Connection& conn, std::string_view function) {
  Result<pg::Rows> r = conn.exec("SELECT " + std::string(function) + "()");
  if (!r) return r.take_error();
  if (r->empty()) return Error(Code::kInternal, "store: " + std::string(function) + "() returned no row");
  if (r->is_null(0, 0)) return std::optional<int64_t>();
  return std::optional<int64_t>(r->int64(0, 0));
}

}  // namespace

Result<int64_t> PgStore::publish_events(pg::Connection& conn) {
  Result<std::optional<int64_t>> seq = select_seq(conn, "kiln_publish_events");
  if (!seq) return seq.take_error();
  return seq->value_or(0);
}

Result<std::optional<int64_t>> PgStore::publish_events_in_writer(pg::Connection& conn) {
  // NULL: the lock was busy.
  return select_seq(conn, "kiln_publish_events_in_writer");
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
    // The safety net: publish what a writer left queued (it died between
    // its commit and its publish), and hear the highest seq committed.
    if (Clock::now() >= next_poll) {
      Result<int64_t> r = publish_events(*conn);
      if (r) notify(*r);
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
