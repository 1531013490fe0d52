#pragma once
// The seam between Kiln's store flows and the SQL engine under them.
//
// Every store flow (controller/store/sql/*.cc) is written once, against this
// interface; SQLite (sqlite_conn.cc) and PostgreSQL (pg/pg_conn.cc) each
// implement it once. What really differs between the engines lives here and
// nowhere else:
//
//   - how a statement is sent and its rows read (Conn, Rows);
//   - the row-lock suffix of a SELECT that a transaction will update
//     (Dialect::for_update: " FOR UPDATE" on PostgreSQL; SQLite's writer
//     transaction already excludes every other writer);
//   - how a constraint violation names the constraint (Constraint: SQLite
//     says "UNIQUE constraint failed: tokens.secret_hash", PostgreSQL names
//     the index, "tokens_secret_hash_key").
//
// How a transaction begins (SQLite's writer lease and BEGIN IMMEDIATE;
// PostgreSQL's pool and snapshot) and how events are numbered are the store
// engine's hooks (controller/store/sql/sql_store.h).
//
// SQL text. Placeholders are spelled $1, $2, ... in both engines (SQLite reads
// "$1" as a named parameter; the adapter binds by that name, so the order in
// which they appear does not matter). A statement must use every parameter it
// is given: a missing one is an error on both engines, never a silent NULL.
// Booleans bind as 0/1 on SQLite and true/false on PostgreSQL (the schemas'
// INTEGER and BOOLEAN columns); Rows::boolean reads either.
//
// Threading: a Conn (and the Rows it returns) belongs to the one call that
// leased it. Rows borrow the connection: read them before the next statement.
//
// Errors: as the engines' own layers (sqlite.h, pg/connection.h) map them:
// kConflict for an integrity violation (the message names the constraint),
// kUnavailable for a lost/locked database, kInsufficientStorage for a full
// disk, kInvalidArgument for a value a text parameter cannot carry, else
// kInternal.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::db {

// Statement parameters: the first add() is $1.
class Binds {
 public:
  using Value = std::variant<std::monostate, int64_t, bool, std::string>;  // monostate: NULL

  Binds() = default;
  Binds& add(int64_t v) { values_.emplace_back(v); return *this; }
  Binds& add(int v) { return add(static_cast<int64_t>(v)); }
  Binds& add(bool v) { values_.emplace_back(v); return *this; }
  Binds& add(std::string_view v) { values_.emplace_back(std::string(v)); return *this; }
  Binds& add(const std::string& v) { return add(std::string_view(v)); }
  Binds& add(const char* v) { return add(std::string_view(v)); }
  Binds& add(std::nullopt_t) { values_.emplace_back(std::monostate{}); return *this; }
  Binds& add(const std::optional<std::string>& v) {
    if (v) return add(*v);
    return add(std::nullopt);
  }
  // The number the next add() gets, for queries built clause by clause
  // ("... AND state = $" + std::to_string(b.next())).
  int next() const { return static_cast<int>(values_.size()) + 1; }
  const std::vector<Value>& values() const { return values_; }

 private:
  std::vector<Value> values_;
};

// A constraint as each engine names it in a violation's message.
struct Constraint {
  std::string_view sqlite;  // "tokens.secret_hash" (columns, as "UNIQUE constraint failed: ..." lists them)
  std::string_view pg;      // "tokens_secret_hash_key" (the index or constraint name)
};

enum class Engine { kSqlite, kPostgres };

struct Dialect {
  Engine engine;
  // Appended to a SELECT whose rows the transaction will update.
  std::string_view for_update;
  // Takes a lock named by the BIGINT $1 until the transaction ends, so that
  // writers of one name run one after another even where they change no
  // common row (a max(seq) + 1 taken at insert): PostgreSQL's advisory
  // transaction lock; "" on SQLite, whose writer transaction already excludes
  // every other writer. See lock_tx.
  std::string_view tx_lock;
  // Whether `e` is the integrity violation of `c`.
  bool violated(const Error& e, const Constraint& c) const;
};

const Dialect& sqlite_dialect();
const Dialect& pg_dialect();

// The rows one statement returned, read forward once. Columns are 0-based.
// Text of a NULL is ""; int64 of a NULL is 0.
class Rows {
 public:
  class Cursor {
   public:
    virtual ~Cursor() = default;
    virtual Result<bool> next() = 0;
    virtual bool is_null(int col) const = 0;
    virtual std::string text(int col) const = 0;
    virtual int64_t int64(int col) const = 0;
    virtual bool boolean(int col) const = 0;
  };
  explicit Rows(std::unique_ptr<Cursor> c) : c_(std::move(c)) {}

  // Moves to the next row: false when there is none.
  Result<bool> next() { return c_->next(); }
  bool is_null(int col) const { return c_->is_null(col); }
  std::string text(int col) const { return c_->text(col); }
  int64_t int64(int col) const { return c_->int64(col); }
  bool boolean(int col) const { return c_->boolean(col); }
  std::optional<std::string> optional_text(int col) const {
    if (is_null(col)) return std::nullopt;
    return text(col);
  }

 private:
  std::unique_ptr<Cursor> c_;
};

class Conn {
 public:
  virtual ~Conn() = default;
  // Runs a statement that returns rows (SELECT, or a write ... RETURNING).
  virtual Result<Rows> query(std::string_view sql, const Binds& binds = {}) = 0;
  // Runs a statement to completion; the rows it changed.
  virtual Result<int64_t> exec(std::string_view sql, const Binds& binds = {}) = 0;
  virtual const Dialect& dialect() const = 0;
};

// Every row of `rows`, read with `read` (returning T or Result<T>).
template <typename T, typename Read>
Result<std::vector<T>> collect(Rows& rows, Read read) {
  std::vector<T> out;
  for (;;) {
    Result<bool> more = rows.next();
    if (!more) return more.take_error();
    if (!*more) return out;
    if constexpr (std::is_same_v<std::decay_t<decltype(read(rows))>, T>) {
      out.push_back(read(rows));
    } else {
      auto v = read(rows);
      if (!v) return v.take_error();
      out.push_back(std::move(*v));
    }
  }
}

// The one row `sql` returns, read with `read`; kNotFound with `missing` when
// it returns none.
template <typename T, typename Read>
Result<T> query_one(Conn& c, std::string_view sql, const Binds& binds, Read read, std::string missing) {
  Result<Rows> r = c.query(sql, binds);
  if (!r) return r.take_error();
  Result<bool> row = r->next();
  if (!row) return row.take_error();
  if (!*row) return Error(Code::kNotFound, std::move(missing));
  return read(*r);
}

// Calls `f(rows)` on each row of `rows`; `f` returns void, or a Status whose
// error stops the walk and is returned.
template <typename F>
Status each_row(Rows& rows, F f) {
  for (;;) {
    Result<bool> more = rows.next();
    if (!more) return more.take_error();
    if (!*more) return ok_status();
    if constexpr (std::is_void_v<decltype(f(rows))>) {
      f(rows);
    } else {
      if (Status s = f(rows); !s) return s;
    }
  }
}

// A JSON column: null when NULL; kInternal "store: corrupt JSON in <what>"
// ("nodes.traits") when its text is not JSON.
Result<nlohmann::json> json_column(const Rows& r, int col, std::string_view what);
// json_column into `out`, for column tables' readers.
Status json_column_into(const Rows& r, int col, std::string_view what, nlohmann::json& out);

// The first column of the one row `sql` returns as an integer (a count, an
// EXISTS); 0 when it returns no row.
Result<int64_t> query_int(Conn& c, std::string_view sql, const Binds& binds = {});

// Inside a write transaction: waits for and takes the dialect's tx_lock on
// `key` (nothing on SQLite). Keys are chosen by the flow that uses them and
// must differ from the migrations' (pg/migrations.h).
Status lock_tx(Conn& c, int64_t key);

}  // namespace kiln::db
