#include "controller/store/pg/connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "common/ids.h"
#include "common/json_text.h"

namespace kiln::pg {

namespace {

// libpq sends a text parameter as a C string, so a NUL byte would silently
// end the value there ("gpu\0x" would be looked up as "gpu"), and the
// server refuses bytes that are not UTF-8 with an internal-looking error.
// Both are the caller's value, refused before anything is sent.
Status check_param_text(const std::vector<std::optional<std::string>>& values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) continue;
    const std::string& v = *values[i];
    const std::string which = "postgresql: parameter $" + std::to_string(i + 1);
    if (v.find('\0') != std::string::npos)
      return Error(Code::kInvalidArgument, which + " holds a NUL byte, which a text value cannot hold");
    if (!is_valid_utf8(v)) return Error(Code::kInvalidArgument, which + " is not valid UTF-8");
  }
  return ok_status();
}

// libpq messages end with a newline and may span lines ("...failed:
// Connection refused\n\tIs the server running..."); an Error is one line.
std::string trimmed(const char* msg) {
  std::string s;
  for (const char* p = msg != nullptr ? msg : ""; *p != '\0'; ++p) {
    const bool space = *p == '\n' || *p == '\t' || *p == ' ';
    if (space && (s.empty() || s.back() == ' ')) continue;
    s += space ? ' ' : *p;
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// libpq's own words about a connection ("connection to server on socket
// \"/run/postgresql/.s.PGSQL.5432\" failed: ...", "... at \"10.0.0.5\", port
// 5432 failed: ...") name where the database lives, and they reach every API
// caller in a 503's detail, tenants included: each quoted part becomes
// "...", the reason stays.
std::string connection_text(const char* msg) {
  std::string s = trimmed(msg);
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '"') {
      out += s[i];
      continue;
    }
    const std::size_t close = s.find('"', i + 1);
    if (close == std::string::npos) break;  // an unmatched quote: drop the rest
    out += "\"...\"";
    i = close;
  }
  return out;
}

Code code_for_sqlstate(std::string_view state) {
  if (state.substr(0, 2) == "23") return Code::kConflict;
  if (state.substr(0, 2) == "08" || state.substr(0, 3) == "57P" || state == "40001" || state == "40P01")
    return Code::kUnavailable;
  return Code::kInternal;
}

// The Error for a failed result (which may be null: out of memory, or the
// connection was lost before a result came).
Error result_error(pg_conn* conn, const PGresult* res, std::string_view sql) {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state != nullptr ? state : "";
  // The primary message only: the DETAIL line repeats the offending values
  // ("Key (secret_hash)=(...) already exists"), which may be secrets.
  const char* primary = res != nullptr ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  std::string msg = primary != nullptr ? trimmed(primary) : connection_text(PQerrorMessage(conn));
  if (msg.empty()) msg = connection_text(PQerrorMessage(conn));
  Code code = sqlstate.empty() ? (PQstatus(conn) == CONNECTION_OK ? Code::kInternal : Code::kUnavailable)
                               : code_for_sqlstate(sqlstate);
  std::string head = "postgresql";
  if (!sqlstate.empty()) head += " [SQLSTATE " + sqlstate + "]";
  // The statement's first words say which one failed without echoing values
  // (they travel as parameters, never in the text).
  std::string what(sql.substr(0, 60));
  return Error(code, head + ": " + msg + " (in: " + what + (sql.size() > 60 ? "...)" : ")"));
}

bool succeeded(const PGresult* res) {
  if (res == nullptr) return false;
  ExecStatusType st = PQresultStatus(res);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

}  // namespace

bool is_unique_violation(const Error& e) {
  return e.code == Code::kConflict && e.message.find("[SQLSTATE 23505]") != std::string::npos;
}

bool is_foreign_key_violation(const Error& e) {
  return e.code == Code::kConflict && e.message.find("[SQLSTATE 23503]") != std::string::npos;
}

bool names_constraint(const Error& e, std::string_view constraint) {
  // PostgreSQL quotes the constraint's name in its message.
  return e.code == Code::kConflict &&
         e.message.find("\"" + std::string(constraint) + "\"") != std::string::npos;
}

// ---------------------------------------------------------------------------
// Rows

Rows::~Rows() {
  if (res_ != nullptr) PQclear(res_);
}

Rows& Rows::operator=(Rows&& o) noexcept {
  if (this != &o) {
    if (res_ != nullptr) PQclear(res_);
    res_ = o.res_;
    o.res_ = nullptr;
  }
  return *this;
}

int Rows::size() const { return res_ != nullptr ? PQntuples(res_) : 0; }

int64_t Rows::affected() const {
  const char* n = res_ != nullptr ? PQcmdTuples(res_) : "";
  int64_t v = 0;
  std::from_chars(n, n + std::strlen(n), v);
  return v;
}

bool Rows::is_null(int row, int col) const { return PQgetisnull(res_, row, col) != 0; }

std::string Rows::text(int row, int col) const {
  if (is_null(row, col)) return {};
  return std::string(PQgetvalue(res_, row, col), static_cast<size_t>(PQgetlength(res_, row, col)));
}

int64_t Rows::int64(int row, int col) const {
  if (is_null(row, col)) return 0;
  const char* v = PQgetvalue(res_, row, col);
  int64_t out = 0;
  std::from_chars(v, v + PQgetlength(res_, row, col), out);
  return out;
}

bool Rows::boolean(int row, int col) const {
  return !is_null(row, col) && PQgetvalue(res_, row, col)[0] == 't';
}

// ---------------------------------------------------------------------------
// Connection

Result<std::unique_ptr<Connection>> Connection::open(const std::string& conninfo) {
  // connect_timeout first, the caller's string (expanded) after it: a
  // keyword given twice takes its last value, so the string's own wins.
  const std::string timeout = std::to_string(kConnectTimeoutSeconds);
  const char* const keys[] = {"connect_timeout", "dbname", nullptr};
  const char* const values[] = {timeout.c_str(), conninfo.c_str(), nullptr};
  pg_conn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return Error(Code::kInternal, "postgresql: out of memory opening a connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    Error e(Code::kUnavailable, "postgresql: cannot connect: " + connection_text(PQerrorMessage(conn)));
    PQfinish(conn);
    return e;
  }
  std::unique_ptr<Connection> c(new Connection(conn));
  // Random per connection: a server session that another client used before
  // (a pooler that does not reset it) may hold statements of that client's.
  c->name_prefix_ = "kiln_" + random_hex(6) + "_";
  // Notices (e.g. "relation already exists, skipping") are not errors and must
  // not reach stderr from a library.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  return c;
}

Connection::~Connection() { PQfinish(conn_); }

Result<const std::string*> Connection::prepared_name(std::string_view sql, int n_params) {
  ++use_clock_;
  if (auto it = prepared_.find(sql); it != prepared_.end()) {
    it->second.used = use_clock_;
    return &it->second.name;
  }
  if (prepared_.size() >= kMaxPrepared) {
    auto oldest = std::min_element(prepared_.begin(), prepared_.end(),
                                   [](const auto& a, const auto& b) { return a.second.used < b.second.used; });
    // Names are never reused, so a DEALLOCATE that fails (the session is
    // gone, or the transaction failed) costs the server a little memory,
    // never a wrong statement.
    (void)exec_script("DEALLOCATE " + oldest->second.name);
    prepared_.erase(oldest);
  }
  std::string name = name_prefix_ + std::to_string(++next_name_);
  std::string text(sql);
  PGresult* res = PQprepare(conn_, name.c_str(), text.c_str(), n_params, nullptr);
  if (!succeeded(res)) {
    Error e = result_error(conn_, res, sql);
    if (res != nullptr) PQclear(res);
    return e;
  }
  PQclear(res);
  auto it = prepared_.emplace(std::move(text), Prepared{std::move(name), use_clock_}).first;
  return &it->second.name;
}

void Connection::forget_prepared() { prepared_.clear(); }

Result<Rows> Connection::exec(std::string_view sql, const Params& params) {
  const auto& values = params.values();
  if (Status s = check_param_text(values); !s) return s.take_error();
  std::vector<const char*> ptrs;
  ptrs.reserve(values.size());
  for (const auto& v : values) ptrs.push_back(v ? v->c_str() : nullptr);
  const int n = static_cast<int>(ptrs.size());
  for (int attempt = 0;; ++attempt) {
    Result<const std::string*> name = prepared_name(sql, n);
    if (!name) return name.take_error();
    PGresult* res = PQexecPrepared(conn_, (*name)->c_str(), n, ptrs.data(), nullptr, nullptr, /*resultFormat=*/0);
    if (succeeded(res)) return Rows(res);
    Error e = result_error(conn_, res, sql);
    if (res != nullptr) PQclear(res);
    // The session lost its statements (DEALLOCATE ALL, DISCARD ALL, a
    // pooler that switched sessions: SQLSTATE 26000, "prepared statement
    // does not exist"), or a migration changed the columns a kept plan
    // returns (0A000, "cached plan must not change result type"): what this
    // connection kept is forgotten and prepared again. Nothing ran, so
    // outside a transaction block the call is made again at once; inside
    // one, the failure has ended the transaction and the caller sees it.
    const bool lost = e.message.find("[SQLSTATE 26000]") != std::string::npos ||
                      e.message.find("[SQLSTATE 0A000]") != std::string::npos;
    if (!lost) return e;
    forget_prepared();
    if (attempt > 0 || PQtransactionStatus(conn_) != PQTRANS_IDLE) return e;
  }
}

Status Connection::exec_script(std::string_view sql) {
  std::string text(sql);
  PGresult* res = PQexec(conn_, text.c_str());
  if (!succeeded(res)) {
    Error e = result_error(conn_, res, sql);
    if (res != nullptr) PQclear(res);
    return e;
  }
  PQclear(res);
  return ok_status();
}

Result<int64_t> Connection::copy_in(std::string_view copy_sql, std::string_view data) {
  std::string text(copy_sql);
  PGresult* res = PQexec(conn_, text.c_str());
  if (res == nullptr || PQresultStatus(res) != PGRES_COPY_IN) {
    Error e = result_error(conn_, res, copy_sql);
    if (res != nullptr) PQclear(res);
    return e;
  }
  PQclear(res);
  // In chunks: PQputCopyData takes an int length.
  constexpr size_t kChunk = 1 << 20;
  std::string failure;
  for (size_t at = 0; at < data.size() && failure.empty(); at += kChunk) {
    size_t n = std::min(kChunk, data.size() - at);
    if (PQputCopyData(conn_, data.data() + at, static_cast<int>(n)) != 1) failure = connection_text(PQerrorMessage(conn_));
  }
  // An error message given to PQputCopyEnd makes the server fail the COPY,
  // so a half-sent table is never committed.
  if (PQputCopyEnd(conn_, failure.empty() ? nullptr : "client could not send the data") != 1 && failure.empty())
    failure = connection_text(PQerrorMessage(conn_));
  int64_t copied = 0;
  std::optional<Error> error;
  while (PGresult* r = PQgetResult(conn_)) {
    if (PQresultStatus(r) == PGRES_COMMAND_OK) {
      copied = Rows(r).affected();
      continue;  // Rows took ownership of r
    }
    if (!error) error = result_error(conn_, r, copy_sql);
    PQclear(r);
  }
  if (error) return *error;
  if (!failure.empty()) return Error(Code::kUnavailable, "postgresql: COPY failed: " + failure);
  return copied;
}

bool Connection::healthy() const { return PQstatus(conn_) == CONNECTION_OK; }

bool Connection::alive() {
  if (PQstatus(conn_) != CONNECTION_OK) return false;
  if (PQtransactionStatus(conn_) != PQTRANS_IDLE) return true;
  // An idle connection has nothing to read unless the server spoke on its
  // own: a notification, or the FATAL notice and then EOF of a backend that
  // is gone. PQconsumeInput reads what is there without blocking, but sees
  // EOF (and marks the connection bad) only on a read that finds nothing
  // more: so read while the socket stays readable. A few rounds suffice
  // (the notice is small); a connection that keeps talking is not dead.
  const int fd = PQsocket(conn_);
  for (int round = 0; round < 4 && fd >= 0; ++round) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    if (PQconsumeInput(conn_) == 0) return false;
    if (PQstatus(conn_) != CONNECTION_OK) return false;
  }
  return PQstatus(conn_) == CONNECTION_OK;
}

Status Connection::reconnect() {
  PQreset(conn_);
  forget_prepared();
  if (PQstatus(conn_) != CONNECTION_OK)
    return Error(Code::kUnavailable, "postgresql: cannot reconnect: " + connection_text(PQerrorMessage(conn_)));
  return ok_status();
}

int Connection::socket() const { return PQsocket(conn_); }

Result<std::vector<std::string>> Connection::take_notifications() {
  if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) != CONNECTION_OK)
    return Error(Code::kUnavailable, "postgresql: connection lost: " + connection_text(PQerrorMessage(conn_)));
  std::vector<std::string> out;
  while (PGnotify* n = PQnotifies(conn_)) {
    out.emplace_back(n->extra != nullptr ? n->extra : "");
    PQfreemem(n);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Transaction

Result<Transaction> Transaction::begin(Connection& conn) {
  if (Status s = conn.exec_script("BEGIN"); !s) return s.take_error();
  return Transaction(&conn);
}

Result<Transaction> Transaction::begin_read(Connection& conn) {
  if (Status s = conn.exec_script("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"); !s) return s.take_error();
  return Transaction(&conn);
}

Transaction::~Transaction() {
  if (conn_ != nullptr) (void)conn_->exec_script("ROLLBACK");
}

Status Transaction::commit() {
  Connection* c = conn_;
  conn_ = nullptr;
  // COMMIT of a transaction that failed inside answers ROLLBACK without an
  // error; the callers return on the first error, so that cannot happen here.
  return c->exec_script("COMMIT");
}

}  // namespace kiln::pg
