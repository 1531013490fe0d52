#include "controller/store/sqlite_store.h"

#include <sqlite3.h>

#include <mutex>
#include <string_view>
#include <thread>
#include <utility>

#include "controller/store/migrations.h"
#include "controller/store/sql/sqlite_conn.h"

namespace kiln {

// SqliteStore: connections, event numbering and migrations; the flows are
// SqlStore's (controller/store/sql).

// ---------------------------------------------------------------------------
// Connections

// Holds the one writer connection, and remembers the owning thread so that a
// write from inside a write is an error rather than a deadlock.
class SqliteStore::WriterLock {
 public:
  explicit WriterLock(SqliteStore* s) : s_(s), lock_(s->writer_mu_) {
    s_->writer_owner_.store(std::this_thread::get_id());
  }
  WriterLock(WriterLock&& o) noexcept : s_(o.s_), lock_(std::move(o.lock_)) { o.s_ = nullptr; }
  WriterLock& operator=(WriterLock&&) = delete;
  ~WriterLock() {
    if (s_ == nullptr) return;
    s_->writer_owner_.store(std::thread::id());
    // Still under writer_mu_, and before the write's caller sees its result.
    if (s_->changed_) {
      s_->changed_ = false;
      s_->generation_.fetch_add(1, std::memory_order_release);
    }
  }
  sql::Database& db() const { return *s_->writer_; }

 private:
  SqliteStore* s_;
  std::unique_lock<std::mutex> lock_;
};

// Borrows a reader connection, waiting while all are lent, and gives it back
// when destroyed.
class SqliteStore::ReaderLease {
 public:
  explicit ReaderLease(SqliteStore* s) : s_(s) {
    std::unique_lock<std::mutex> lock(s_->readers_mu_);
    s_->reader_free_.wait(lock, [&] { return !s_->free_readers_.empty(); });
    db_ = s_->free_readers_.back();
    s_->free_readers_.pop_back();
  }
  ReaderLease(const ReaderLease&) = delete;
  ReaderLease& operator=(const ReaderLease&) = delete;
  ~ReaderLease() {
    {
      std::lock_guard<std::mutex> lock(s_->readers_mu_);
      s_->free_readers_.push_back(db_);
    }
    s_->reader_free_.notify_one();
  }
  sql::Database& db() const { return *db_; }

 private:
  SqliteStore* s_;
  sql::Database* db_ = nullptr;
};

Result<SqliteStore::WriterLock> SqliteStore::lock_writer() {
  if (writer_owner_.load() == std::this_thread::get_id())
    return Error(Code::kInternal, "store: write from inside update_node_if's mutate or the event listener "
                                  "(would deadlock)");
  return WriterLock(this);
}

SqliteStore::ReaderLease SqliteStore::lease_reader() { return ReaderLease(this); }

Status SqliteStore::write(const std::function<Status(Tx&)>& f) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  Result<sql::Transaction> txn = sql::Transaction::begin_immediate(w->db());
  if (!txn) return txn.take_error();
  db::SqliteConn conn(w->db());
  Tx tx{conn};
  if (Status s = f(tx); !s) return s;
  if (Status s = txn->commit(); !s) return s;
  if (tx.last_seq > 0) notify(tx.last_seq);
  return ok_status();
}

Status SqliteStore::autocommit(const std::function<Status(db::Conn&)>& f) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  db::SqliteConn conn(w->db());
  return f(conn);
}

Status SqliteStore::read(const std::function<Status(db::Conn&)>& f) {
  ReaderLease r = lease_reader();
  db::SqliteConn conn(r.db());
  return f(conn);
}

Status SqliteStore::snapshot(const std::function<Status(db::Conn&)>& f) {
  ReaderLease r = lease_reader();
  Result<sql::Transaction> txn = sql::Transaction::begin_read(r.db());
  if (!txn) return txn.take_error();
  db::SqliteConn conn(r.db());
  if (Status s = f(conn); !s) return s;
  return txn->commit();
}

// ---------------------------------------------------------------------------
// Events: numbered by AUTOINCREMENT (the one writer takes them in commit
// order), announced after the commit while the writer is still held.

Result<int64_t> SqliteStore::insert_events(db::Conn& conn, const std::vector<EventDraft>& events, const Node* node,
                                           const std::string& fallback_tenant) {
  return insert_event_rows(conn, EventRows::kLog, events, node, fallback_tenant);
}

void SqliteStore::notify(int64_t seq) {
  if (seq > 0 && listener_) listener_(seq);
}

void SqliteStore::set_event_listener(std::function<void(int64_t)> listener) {
  std::lock_guard<std::mutex> lock(writer_mu_);
  listener_ = std::move(listener);
}

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const SqliteStoreOptions& options) {
  if (options.path.empty() || options.path == ":memory:" || options.path.rfind("file:", 0) == 0)
    return Error::invalid("path", "must be a database file path (readers share it with the writer)");
  sql::OpenOptions wopts;
  wopts.busy_timeout_ms = options.busy_timeout_ms;
  Result<std::unique_ptr<sql::Database>> writer = sql::Database::open(options.path, wopts);
  if (!writer) return writer.take_error();
  sql::Database& w = **writer;
  Result<std::string> mode = w.query_text("PRAGMA journal_mode=WAL");
  if (!mode) return mode.take_error();
  if (*mode != "wal")
    return Error(Code::kInternal, "store: could not enable WAL on " + options.path + " (journal_mode " + *mode + ")");
  if (Status s = w.exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON"); !s) return s.take_error();

  std::vector<std::unique_ptr<sql::Database>> readers;
  int n = std::max(1, options.reader_connections);
  sql::OpenOptions ropts;
  ropts.create = false;
  ropts.query_only = true;
  ropts.busy_timeout_ms = options.busy_timeout_ms;
  for (int i = 0; i < n; ++i) {
    Result<std::unique_ptr<sql::Database>> r = sql::Database::open(options.path, ropts);
    if (!r) return r.take_error();
    readers.push_back(std::move(*r));
  }
  return std::unique_ptr<SqliteStore>(new SqliteStore(options, std::move(*writer), std::move(readers)));
}

SqliteStore::SqliteStore(const SqliteStoreOptions& options, std::unique_ptr<sql::Database> writer,
                         std::vector<std::unique_ptr<sql::Database>> readers)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : &system_clock_),
      writer_(std::move(writer)),
      readers_(std::move(readers)) {
  for (auto& r : readers_) free_readers_.push_back(r.get());
  sqlite3_update_hook(writer_->raw(), [](void* self, int op, const char* db, const char* table, sqlite3_int64 rowid) {
    on_row_changed(self, op, db, table, rowid);
  }, this);
}

// Rows no cached read depends on, written often while nothing a reader
// caches changes: conductor and agent heartbeats, the audit trail, events.
// Every other table (new ones included) ends cached reads when a row of it
// changes. SQLite calls the hook for each row a statement changes, rolled
// back or not (a rollback then costs the caches a rebuild, nothing more),
// but not for a DELETE without WHERE on a table without triggers (the
// truncate optimisation): the store never deletes every row of a table so.
void SqliteStore::on_row_changed(void* self, int, const char*, const char* table, int64_t) {
  static constexpr std::string_view kQuiet[] = {"conductors", "agent_sessions", "agent_commands", "audit", "events"};
  const std::string_view t(table);
  for (std::string_view q : kQuiet)
    if (t == q) return;
  static_cast<SqliteStore*>(self)->changed_ = true;
}

SqliteStore::~SqliteStore() = default;

Result<std::unique_ptr<NodeStore>> open_sqlite_store(const SqliteStoreOptions& options) {
  Result<std::unique_ptr<SqliteStore>> s = SqliteStore::open(options);
  if (!s) return s.take_error();
  return std::unique_ptr<NodeStore>(std::move(*s));
}

// ---------------------------------------------------------------------------
// Migrations

Status SqliteStore::migrate() {
  {
    Result<WriterLock> w = lock_writer();
    if (!w) return w.take_error();
    if (Status s = store::apply_migrations(w->db(), now_ms()); !s) return s;
  }
  return place_nodes_on_ring();
}

Result<std::vector<std::string>> SqliteStore::applied_migrations() {
  ReaderLease r = lease_reader();
  return store::applied_migrations(r.db());
}

}  // namespace kiln
