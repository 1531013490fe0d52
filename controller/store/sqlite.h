#pragma once
// Small RAII wrappers over the SQLite C API, after bitcoin's src/wallet/sqlite.h:
// a Database owns one connection and its prepared statements, a Statement owns
// one sqlite3_stmt, a StatementRef borrows a cached statement and resets it when
// it goes out of scope, and a Transaction rolls back unless committed.
//
// Threading: a Database (and everything borrowed from it) is used by one thread
// at a time; the store guarantees that with its writer mutex and reader pool.
// Connections are opened SQLITE_OPEN_NOMUTEX for that reason.
//
// Errors: SQLite result codes become kiln::Error values carrying SQLite's own
// message. A constraint violation is kConflict (the message names the
// constraint, e.g. "UNIQUE constraint failed: nodes.name", so the store can
// tell which field clashed); SQLITE_BUSY / SQLITE_LOCKED after busy_timeout is
// kUnavailable (someone else holds the file: retry later); a full disk
// (SQLITE_FULL, or an SQLITE_IOERR whose errno is ENOSPC or EDQUOT) is
// kInsufficientStorage (507) whose message starts "no space left on device" and names the
// database's directory (the operator frees space; the writer connection stays
// usable and the next write succeeds once there is room); anything else is
// kInternal. A write that fails so has written nothing: SQLite rolls the
// statement or transaction back, and Transaction's ROLLBACK covers the rest.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::sql {

// Maps a SQLite result code (and the connection's message) to an Error.
Error sqlite_error(sqlite3* db, int rc, std::string_view context);

// One prepared statement. Bind errors are remembered and reported by the next
// step(), so call sites can chain binds without checking each one.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Parameters are 1-based, as in SQLite. Text is copied (SQLITE_TRANSIENT).
  Statement& bind(int index, int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<int64_t>(value)); }
  Statement& bind(int index, bool value) { return bind(index, static_cast<int64_t>(value ? 1 : 0)); }
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, std::nullopt_t);
  // Empty optional binds NULL.
  Statement& bind(int index, const std::optional<std::string>& value);

  // Runs one step: true when a row is available, false when done.
  Result<bool> step();
  // Steps to completion, ignoring rows (INSERT/UPDATE/DELETE).
  Status run();

  // Columns are 0-based, as in SQLite. Text of a NULL column is "".
  int64_t column_int64(int col) const;
  bool column_bool(int col) const { return column_int64(col) != 0; }
  std::string column_text(int col) const;
  bool column_is_null(int col) const;

  // Resets the statement and clears its bindings and any remembered bind error.
  void reset();
  // The SQL text, for error messages.
  std::string_view sql() const;
  // The statement itself, for reads these accessors do not cover (a value's
  // storage class, blobs: the store copy in store_copy.cc).
  sqlite3_stmt* raw() const { return stmt_; }

 private:
  void note_bind(int rc, int index);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  std::optional<Error> bind_error_;
  friend class Database;
  friend class StatementRef;
  bool in_use_ = false;  // borrowed by a StatementRef
};

// A borrowed (cached) statement; resets it when it goes out of scope so the
// next user finds it clean and the read snapshot it held is released.
class StatementRef {
 public:
  StatementRef(Statement* s, std::unique_ptr<Statement> owned);
  StatementRef(StatementRef&& o) noexcept;
  StatementRef& operator=(StatementRef&&) = delete;
  StatementRef(const StatementRef&) = delete;
  ~StatementRef();

  Statement* operator->() const { return s_; }
  Statement& operator*() const { return *s_; }

 private:
  Statement* s_;
  std::unique_ptr<Statement> owned_;  // set when the cached one was busy (nested use)
};

struct OpenOptions {
  bool create = true;      // create the file when absent
  bool query_only = false; // reader connections refuse writes
  int busy_timeout_ms = 5000;
};

// One connection plus its statement cache (keyed by SQL text).
class Database {
 public:
  static Result<std::unique_ptr<Database>> open(const std::string& path, const OpenOptions& options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements without results (pragmas, DDL). Not cached.
  Status exec(std::string_view sql);
  // Runs one statement through the cache (BEGIN/COMMIT/ROLLBACK: every write).
  Status run_cached(const std::string& sql);
  // A single-row, single-column text query (e.g. "PRAGMA journal_mode=WAL").
  Result<std::string> query_text(std::string_view sql);
  // The cached statement for `sql`, prepared on first use.
  Result<StatementRef> prepare(const std::string& sql);
  // Rows changed by the last INSERT/UPDATE/DELETE on this connection.
  int64_t changes() const;
  // Rowid of the last successful INSERT on this connection.
  int64_t last_insert_rowid() const;
  sqlite3* raw() const { return db_; }

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  Result<std::unique_ptr<Statement>> prepare_uncached(const std::string& sql);

  sqlite3* db_;
  std::unordered_map<std::string, std::unique_ptr<Statement>> cache_;
};

// An explicit transaction: rolled back on destruction unless commit() succeeded.
class Transaction {
 public:
  // BEGIN IMMEDIATE: takes the write lock now, so the read-check-write inside
  // cannot be interleaved with another writer (and never fails to upgrade).
  static Result<Transaction> begin_immediate(Database& db);
  // BEGIN (deferred) on a reader: several queries see one snapshot.
  static Result<Transaction> begin_read(Database& db);

  Transaction(Transaction&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  Status commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;  // null once committed or rolled back
};

}  // namespace kiln::sql
