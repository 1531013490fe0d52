#include "controller/store/sqlite_store.h"

#include <utility>

#include "controller/store/migrations.h"
#include "controller/store/sql/sqlite_conn.h"
#include "controller/store/sqlite_locks.h"
#include "controller/store/sqlite_rows.h"

namespace kiln {

using json = nlohmann::json;
using namespace store_rows;

// SqliteStore: connections and migrations; the aggregates live in the
// other sqlite_*.cc files.

// ---------------------------------------------------------------------------
// Connections

Result<SqliteStore::WriterLock> SqliteStore::lock_writer() {
  if (writer_owner_.load() == std::this_thread::get_id())
    return Error(Code::kInternal, "store: write from inside update_node_if's mutate or the event listener "
                                  "(would deadlock)");
  return WriterLock(this);
}

SqliteStore::ReaderLease SqliteStore::lease_reader() { return ReaderLease(this); }

Status SqliteStore::on_writer(const std::function<Status(sql::Database&)>& f) {
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  return f(w->db());
}

Status SqliteStore::on_reader(const std::function<Status(sql::Database&)>& f) {
  ReaderLease r = lease_reader();
  return f(r.db());
}

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
  return insert_event_rows(conn, events, node, fallback_tenant, /*first_seq=*/0);
}

Result<int64_t> SqliteStore::insert_events(const std::vector<EventDraft>& events, const Node* node,
                                           const std::string& fallback_tenant) {
  db::SqliteConn conn(*writer_);
  return insert_events(conn, events, node, fallback_tenant);
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
  Result<WriterLock> w = lock_writer();
  if (!w) return w.take_error();
  return store::apply_migrations(w->db(), now_ms());
}

Result<std::vector<std::string>> SqliteStore::applied_migrations() {
  ReaderLease r = lease_reader();
  return store::applied_migrations(r.db());
}

}  // namespace kiln
