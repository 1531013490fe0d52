#include "controller/store/pg/pg_store.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <utility>

#include "controller/store/pg/migrations.h"
#include "controller/store/pg/pg_conn.h"

namespace kiln {

// PgStore: the connection pool and migrations.

Result<std::unique_ptr<PgStore>> PgStore::open(const PgStoreOptions& options) {
  if (options.connections < 1) return Error::invalid("connections", "must be at least 1");
  std::vector<std::unique_ptr<pg::Connection>> conns;
  for (int i = 0; i < options.connections; ++i) {
    Result<std::unique_ptr<pg::Connection>> c = pg::Connection::open(options.conninfo);
    if (!c) return c.take_error();
    conns.push_back(std::move(*c));
  }
  return std::unique_ptr<PgStore>(new PgStore(options, std::move(conns)));
}

PgStore::PgStore(const PgStoreOptions& options, std::vector<std::unique_ptr<pg::Connection>> conns)
    : clock_(options.clock != nullptr ? options.clock : &system_clock_),
      conns_(std::move(conns)),
      reconnect_backoff_(std::max(options.reconnect_backoff, std::chrono::milliseconds(1))),
      reconnect_backoff_max_(std::max(options.reconnect_backoff_max, reconnect_backoff_)),
      conninfo_(options.conninfo),
      event_poll_interval_(options.event_poll_interval),
      listen_retry_(options.listen_retry) {
  for (auto& c : conns_) free_.push_back(c.get());
}

PgStore::~PgStore() {
  stopping_ = true;
  if (wake_fd_[1] >= 0) {
    char b = 1;
    ssize_t n = ::write(wake_fd_[1], &b, 1);
    (void)n;  // the pipe is empty before this one byte: it cannot be full
  }
  if (listen_thread_.joinable()) listen_thread_.join();
  for (int fd : wake_fd_)
    if (fd >= 0) ::close(fd);
}

Status PgStore::write(const std::function<Status(Tx&)>& f) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Transaction> txn = pg::Transaction::begin(l->conn());
  if (!txn) return txn.take_error();
  db::PgConn conn(l->conn());
  Tx tx{conn};
  if (Status s = f(tx); !s) return s;
  std::optional<int64_t> published_here;
  if (tx.appended_events) {
    Result<std::optional<int64_t>> p = publish_events_in_writer(l->conn());
    if (!p) return p.take_error();  // the transaction fails whole, nothing written
    published_here = *p;
  }
  if (Status s = txn->commit(); !s) return s;
  if (published_here) {
    notify(*published_here);
  } else if (tx.appended_events) {
    // Another publisher was at work. Committed whatever happens here: a
    // failed publish leaves the events queued for the next one (see
    // "Events" in pg_store.h).
    Result<int64_t> published = publish_events(l->conn());
    if (published) notify(*published);
  }
  return ok_status();
}

Status PgStore::autocommit(const std::function<Status(db::Conn&)>& f) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  db::PgConn conn(l->conn());
  return f(conn);
}

Status PgStore::read(const std::function<Status(db::Conn&)>& f) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  db::PgConn conn(l->conn());
  return f(conn);
}

Status PgStore::snapshot(const std::function<Status(db::Conn&)>& f) {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  Result<pg::Transaction> txn = pg::Transaction::begin_read(l->conn());
  if (!txn) return txn.take_error();
  db::PgConn conn(l->conn());
  if (Status s = f(conn); !s) return s;
  return txn->commit();
}

Result<WriteGeneration> PgStore::database_generation() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  // Autocommit: the statement's own snapshot, as fresh as the call.
  Result<pg::Rows> r = l->conn().exec("SELECT pg_current_snapshot()::text");
  if (!r) return r.take_error();
  if (r->empty()) return Error(Code::kInternal, "store: pg_current_snapshot() returned no row");
  WriteGeneration g;
  g.snapshot = r->text(0, 0);
  // xmin:xmax:xip-list. xmax only orders two generations; the text decides
  // whether they are the same, so a value that does not parse costs nothing
  // but the order.
  const std::size_t colon = g.snapshot.find(':');
  if (colon != std::string::npos) {
    const char* first = g.snapshot.data() + colon + 1;
    if (std::from_chars(first, g.snapshot.data() + g.snapshot.size(), g.order).ec != std::errc()) g.order = 0;
  }
  return g;
}

PgStore::Lease::~Lease() {
  if (conn_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(store_->pool_mu_);
    store_->free_.push_back(conn_);
  }
  store_->pool_free_.notify_one();
}

Result<PgStore::Lease> PgStore::lease() {
  pg::Connection* c = nullptr;
  {
    std::unique_lock<std::mutex> lock(pool_mu_);
    pool_free_.wait(lock, [&] { return !free_.empty(); });
    c = free_.back();
    free_.pop_back();
  }
  Lease l(*this, c);
  // A server restart, a terminated backend or a dropped TCP connection
  // leaves the connection broken: re-established here, unless a reconnect
  // failed within the back-off ("Database outages" in pg_store.h).
  if (c->alive()) return l;
  using SteadyClock = std::chrono::steady_clock;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (backoff_now_.count() > 0 && SteadyClock::now() < retry_at_)
      return Error(Code::kUnavailable, last_connect_error_ + " (not retried for " +
                                           std::to_string(backoff_now_.count()) + " ms)");
  }
  Status s = c->reconnect();
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (s) {
    backoff_now_ = std::chrono::milliseconds(0);
    return l;
  }
  backoff_now_ = backoff_now_.count() == 0 ? reconnect_backoff_ : std::min(backoff_now_ * 2, reconnect_backoff_max_);
  retry_at_ = SteadyClock::now() + backoff_now_;
  last_connect_error_ = s.error().message;
  return s.take_error();
}

Status PgStore::migrate() {
  {
    Result<Lease> l = lease();
    if (!l) return l.take_error();
    if (Status s = pg::apply_migrations(l->conn(), now_ms()); !s) return s;
  }
  return place_nodes_on_ring();
}

Result<std::vector<std::string>> PgStore::applied_migrations() {
  Result<Lease> l = lease();
  if (!l) return l.take_error();
  return pg::applied_migrations(l->conn());
}

}  // namespace kiln
