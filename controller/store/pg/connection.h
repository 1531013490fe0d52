#pragma once
// A thin RAII layer over libpq, the PostgreSQL client library: a Connection
// owns one PGconn, Rows owns one PGresult, a Transaction rolls back unless
// committed. Parameters travel apart from the SQL text ($1..$n, text
// format), so no value is ever spliced into SQL.
//
// Statements are prepared: the first exec() of a text on a connection
// prepares it under a name of the connection's own (PQprepare), and every
// later one only binds and executes it (PQexecPrepared), so the server
// parses and analyses each text once per connection instead of at every
// call (with PQexecParams, parsing and planning were a quarter of
// PostgreSQL's CPU in a create burst). At most kMaxPrepared texts are kept
// per connection; the least recently used one is deallocated to make room.
// The server re-plans a kept statement by itself when a table it reads is
// altered or analysed. Named statements live in the server session, so a
// pooler between kilnd and PostgreSQL must keep sessions (PgBouncer: session
// mode, or transaction mode with max_prepared_statements set).
//
// Threading: a Connection (and the Rows it returns, which own their data and
// outlive nothing) is used by one thread at a time; the store guarantees that
// with its connection pool. libpq itself is thread-safe for distinct
// connections.
//
// Errors: a failed statement becomes a kiln::Error carrying the server's
// message and SQLSTATE. Integrity violations (class 23: unique, foreign key,
// check) are kConflict and the message names the constraint
// ("duplicate key value violates unique constraint \"nodes_name_key\""), so
// the store can tell which field clashed; only the primary message is kept,
// never the DETAIL line that repeats the row's values; a lost or refused connection
// (class 08, 57P0x shutdown) and serialization failures or deadlocks (40001,
// 40P01: retry) are kUnavailable; anything else is kInternal. A parameter
// that a text value cannot carry (a NUL byte, which libpq would silently
// treat as the end of the value, or bytes that are not UTF-8) is
// kInvalidArgument before anything is sent: never a truncated value.
// Connection
// strings may carry a password: they are never put into an Error.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"

struct pg_conn;
struct pg_result;

namespace kiln::pg {

// Statement parameters, $1 first. Values are sent as text; NULL is an empty
// optional. Booleans are sent as "t"/"f", integers in decimal.
class Params {
 public:
  Params() = default;
  Params& add(int64_t v) { values_.emplace_back(std::to_string(v)); return *this; }
  Params& add(int v) { return add(static_cast<int64_t>(v)); }
  Params& add(bool v) { values_.emplace_back(v ? "t" : "f"); return *this; }
  Params& add(std::string_view v) { values_.emplace_back(std::string(v)); return *this; }
  Params& add(const std::string& v) { return add(std::string_view(v)); }
  Params& add(const char* v) { return add(std::string_view(v)); }
  Params& add(std::nullopt_t) { values_.emplace_back(std::nullopt); return *this; }
  Params& add(const std::optional<std::string>& v) { values_.push_back(v); return *this; }
  // The number the next add() will get ("$" + next_index()), for built queries.
  int next_index() const { return static_cast<int>(values_.size()) + 1; }
  const std::vector<std::optional<std::string>>& values() const { return values_; }

 private:
  std::vector<std::optional<std::string>> values_;
};

// The rows a statement returned (or none, for INSERT/UPDATE/DELETE without
// RETURNING). Owns its PGresult. Rows and columns are 0-based.
class Rows {
 public:
  explicit Rows(pg_result* res) : res_(res) {}
  ~Rows();
  Rows(Rows&& o) noexcept : res_(o.res_) { o.res_ = nullptr; }
  Rows& operator=(Rows&& o) noexcept;
  Rows(const Rows&) = delete;
  Rows& operator=(const Rows&) = delete;

  int size() const;
  bool empty() const { return size() == 0; }
  // Rows an INSERT/UPDATE/DELETE touched.
  int64_t affected() const;

  bool is_null(int row, int col) const;
  // Text of a NULL is "".
  std::string text(int row, int col) const;
  // 0 for NULL. Integers come back in decimal text; bad text reads 0 (the
  // columns read this way are BIGINT, so that cannot happen).
  int64_t int64(int row, int col) const;
  // PostgreSQL's text form of a BOOLEAN is "t" or "f".
  bool boolean(int row, int col) const;

 private:
  pg_result* res_;
};

class Connection {
 public:
  // Connects with a libpq connection string or URI
  // ("postgresql://user@host:port/db", "host=/run/pg port=5433 dbname=kiln").
  // kUnavailable with libpq's message when the server cannot be reached or
  // refuses; the string itself is not repeated (it may hold a password).
  // Unless the string sets connect_timeout, a connection attempt (and each
  // reconnect()) gives up after kConnectTimeoutSeconds: libpq's default is
  // to wait for ever on a host that drops packets, and a pool borrower would
  // hang with it.
  static constexpr int kConnectTimeoutSeconds = 5;
  static Result<std::unique_ptr<Connection>> open(const std::string& conninfo);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one statement with `params` and returns its rows. kInvalidArgument,
  // without a round trip, for a parameter holding a NUL byte or invalid UTF-8.
  // Prepares the text on its first use on this connection (see above); a
  // text the server refuses to prepare fails here and is not kept.
  Result<Rows> exec(std::string_view sql, const Params& params = {});
  // How many statement texts this connection keeps prepared (for tests).
  std::size_t prepared_count() const { return prepared_.size(); }
  static constexpr std::size_t kMaxPrepared = 256;
  // Runs one or more ';'-separated statements without parameters (DDL,
  // migrations). In one implicit transaction unless they contain their own.
  Status exec_script(std::string_view sql);
  // COPY ... FROM STDIN: sends `copy_sql` (a COPY statement reading STDIN in
  // text format), then `data` (rows in COPY's text format: tab-separated,
  // newline-terminated, \N for NULL, backslash escapes), then the end marker.
  // Returns the rows copied. The bulk path of `kilnd migrate-store`.
  Result<int64_t> copy_in(std::string_view copy_sql, std::string_view data);
  // Whether the connection is still up (false after the server went away).
  // Knows only what the last statement found: a connection whose server
  // shut down or terminated its backend while it sat idle still reads true.
  bool healthy() const;
  // Whether an idle connection is still up, by reading what the server sent
  // meanwhile without blocking: a server that stops (pg_ctl stop -m fast or
  // immediate) or terminates the backend (pg_terminate_backend) sends its
  // FATAL notice and closes the socket, which this sees. The pool asks it
  // before lending a connection, so no request is the one that finds the
  // connection dead. Inside a transaction it answers healthy().
  bool alive();
  // Re-establishes a broken connection (PQreset). The new session has no
  // prepared statements: the next exec() of each text prepares it again.
  Status reconnect();

  // For a connection that LISTENs (PgStore's event listener). The socket to
  // wait on (poll for reading) until the server sends something; -1 when the
  // connection has none (lost).
  int socket() const;
  // Reads what the server has sent, without blocking, and returns the
  // payloads of the notifications received so far (NOTIFY on a channel this
  // connection LISTENs to), oldest first; empty when there are none.
  // kUnavailable when the connection is lost (it stays broken: reconnect()).
  // Notifications that arrived during an exec() are returned here too.
  Result<std::vector<std::string>> take_notifications();

 private:
  explicit Connection(pg_conn* conn) : conn_(conn) {}
  // The server-side name of `sql`, preparing it first when it has none
  // (evicting the least recently used text at kMaxPrepared).
  Result<const std::string*> prepared_name(std::string_view sql, int n_params);
  void forget_prepared();

  // Transparent lookup: exec() finds a text by its string_view.
  struct TextHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Prepared {
    std::string name;   // name_prefix_ + a counter: never reused on this connection
    uint64_t used = 0;  // use_clock_ at the last exec(), for eviction
  };
  pg_conn* conn_;
  std::string name_prefix_ = "kiln_";  // "kiln_<12 random hex>_" once open() made it
  std::unordered_map<std::string, Prepared, TextHash, std::equal_to<>> prepared_;
  uint64_t use_clock_ = 0;
  uint64_t next_name_ = 0;
};

// An explicit transaction (BEGIN, READ COMMITTED): rolled back on destruction
// unless commit() succeeded.
class Transaction {
 public:
  static Result<Transaction> begin(Connection& conn);
  // A read-only snapshot (REPEATABLE READ): several queries (a node and its
  // ports, a page and the page's ports) see one committed state.
  static Result<Transaction> begin_read(Connection& conn);
  Transaction(Transaction&& o) noexcept : conn_(o.conn_) { o.conn_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  Status commit();

 private:
  explicit Transaction(Connection* conn) : conn_(conn) {}
  Connection* conn_;  // null once committed or rolled back
};

// The SQLSTATE prefix of a kConflict Error from this layer is kept in the
// message as "[SQLSTATE 23505]": whether `e` is a unique violation.
bool is_unique_violation(const Error& e);
// Whether `e` is a foreign key violation (SQLSTATE 23503): a row referring to
// a node that does not exist (or was deleted meanwhile).
bool is_foreign_key_violation(const Error& e);
// Whether the integrity violation `e` names `constraint` ("images_name_key",
// "hosts_pkey"): which unique index or key a write hit, and so which field.
bool names_constraint(const Error& e, std::string_view constraint);

}  // namespace kiln::pg
