#include "controller/store/sqlite.h"

#include <sqlite3.h>

#include <cassert>
#include <cerrno>
#include <filesystem>
#include <utility>

namespace kiln::sql {

namespace {

// Whether `rc` on `db` means the disk (or the user's quota) is full. SQLite
// says SQLITE_FULL when a write() came up short with ENOSPC; a full disk met
// elsewhere (fsync, growing the -shm file, a truncate) is an SQLITE_IOERR_*
// whose cause only the OS errno SQLite kept tells.
bool disk_full(sqlite3* db, int rc) {
  if ((rc & 0xff) == SQLITE_FULL) return true;
  if ((rc & 0xff) != SQLITE_IOERR || db == nullptr) return false;
  const int e = sqlite3_system_errno(db);
  return e == ENOSPC || e == EDQUOT;
}

// The directory of the connection's main database file: what an operator
// must free space on.
std::string data_directory(sqlite3* db) {
  const char* file = db != nullptr ? sqlite3_db_filename(db, "main") : nullptr;
  if (file == nullptr || *file == '\0') return "the database's directory";
  std::string dir = std::filesystem::path(file).parent_path().string();
  return dir.empty() ? "." : dir;
}

// The Error for `rc` on `db`, whose SQLite text is `msg` ("sqlite: ...").
Error classify(sqlite3* db, int rc, std::string msg) {
  if (disk_full(db, rc))
    return Error(Code::kInsufficientStorage, "no space left on device: cannot write the database in " + data_directory(db) +
                                         " (" + msg + "); nothing was written");
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT: return Error(Code::kConflict, std::move(msg));
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Error(Code::kUnavailable, std::move(msg));
    default: return Error(Code::kInternal, std::move(msg));
  }
}

}  // namespace

Error sqlite_error(sqlite3* db, int rc, std::string_view context) {
  std::string msg = "sqlite: ";
  msg += (db != nullptr && sqlite3_errcode(db) == rc) ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if (!context.empty()) {
    msg += " (";
    msg += context;
    msg += ")";
  }
  return classify(db, rc, std::move(msg));
}

// --- Statement ---

Statement::~Statement() { sqlite3_finalize(stmt_); }

void Statement::note_bind(int rc, int index) {
  if (rc != SQLITE_OK && !bind_error_)
    bind_error_ = sqlite_error(db_, rc, "bind " + std::to_string(index) + " of " + std::string(sql()));
}

Statement& Statement::bind(int index, int64_t value) {
  note_bind(sqlite3_bind_int64(stmt_, index, value), index);
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  // A zero-length text must still be text (not NULL): pass a non-null pointer.
  note_bind(sqlite3_bind_text64(stmt_, index, value.empty() ? "" : value.data(), value.size(),
                                SQLITE_TRANSIENT, SQLITE_UTF8),
            index);
  return *this;
}

Statement& Statement::bind(int index, std::nullopt_t) {
  note_bind(sqlite3_bind_null(stmt_, index), index);
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::string>& value) {
  return value ? bind(index, std::string_view(*value)) : bind(index, std::nullopt);
}

Result<bool> Statement::step() {
  if (bind_error_) return *bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return sqlite_error(db_, rc, sql());
}

Status Statement::run() {
  for (;;) {
    Result<bool> r = step();
    if (!r) return r.take_error();
    if (!*r) return ok_status();
  }
}

int64_t Statement::column_int64(int col) const { return sqlite3_column_int64(stmt_, col); }

std::string Statement::column_text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  if (p == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
}

bool Statement::column_is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_.reset();
}

std::string_view Statement::sql() const {
  const char* s = sqlite3_sql(stmt_);
  return s != nullptr ? std::string_view(s) : std::string_view();
}

// --- StatementRef ---

StatementRef::StatementRef(Statement* s, std::unique_ptr<Statement> owned) : s_(s), owned_(std::move(owned)) {
  if (!owned_) s_->in_use_ = true;
}

StatementRef::StatementRef(StatementRef&& o) noexcept : s_(o.s_), owned_(std::move(o.owned_)) { o.s_ = nullptr; }

StatementRef::~StatementRef() {
  if (s_ == nullptr) return;
  s_->reset();
  if (!owned_) s_->in_use_ = false;
}

// --- Database ---

Result<std::unique_ptr<Database>> Database::open(const std::string& path, const OpenOptions& options) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (options.create) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    Error e = sqlite_error(raw, rc, "open " + path);
    sqlite3_close(raw);  // a handle is returned even on failure
    return e;
  }
  std::unique_ptr<Database> db(new Database(raw));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, options.busy_timeout_ms);
  if (options.query_only) {
    if (Status s = db->exec("PRAGMA query_only=ON"); !s) return s.take_error();
  }
  return db;
}

Database::~Database() {
  cache_.clear();  // finalize every statement before closing
  sqlite3_close(db_);
}

Status Database::exec(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return ok_status();
  std::string msg = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  return classify(db_, rc, "sqlite: " + msg);
}

Status Database::run_cached(const std::string& sql) {
  Result<StatementRef> st = prepare(sql);
  if (!st) return st.take_error();
  return (*st)->run();
}

Result<std::string> Database::query_text(std::string_view sql) {
  Result<std::unique_ptr<Statement>> st = prepare_uncached(std::string(sql));
  if (!st) return st.take_error();
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  if (!*row) return std::string();
  return (*st)->column_text(0);
}

Result<std::unique_ptr<Statement>> Database::prepare_uncached(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(db_, rc, "prepare " + sql);
  assert(stmt != nullptr && "empty SQL");
  return std::make_unique<Statement>(db_, stmt);
}

Result<StatementRef> Database::prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    Result<std::unique_ptr<Statement>> st = prepare_uncached(sql);
    if (!st) return st.take_error();
    it = cache_.emplace(sql, std::move(*st)).first;
  }
  if (it->second->in_use_) {
    // The same SQL is already being stepped further up this call stack: give
    // this caller its own copy rather than resetting the other one under it.
    Result<std::unique_ptr<Statement>> st = prepare_uncached(sql);
    if (!st) return st.take_error();
    Statement* p = st->get();
    return StatementRef(p, std::move(*st));
  }
  return StatementRef(it->second.get(), nullptr);
}

int64_t Database::changes() const { return sqlite3_changes64(db_); }

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }

// --- Transaction ---

Result<Transaction> Transaction::begin_immediate(Database& db) {
  if (Status s = db.run_cached("BEGIN IMMEDIATE"); !s) return s.take_error();
  return Transaction(&db);
}

Result<Transaction> Transaction::begin_read(Database& db) {
  if (Status s = db.run_cached("BEGIN"); !s) return s.take_error();
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_ == nullptr) return;
  // Nothing useful can be done if ROLLBACK fails (the connection is then
  // already out of the transaction: SQLite rolled back by itself).
  (void)db_->run_cached("ROLLBACK");
}

Status Transaction::commit() {
  assert(db_ != nullptr && "commit twice");
  Status s = db_->run_cached("COMMIT");
  if (!s) {
    // A failed COMMIT (SQLITE_BUSY) leaves the transaction open; roll back in
    // the destructor so the connection is clean for the next caller.
    return s;
  }
  db_ = nullptr;
  return ok_status();
}

}  // namespace kiln::sql
