#include "controller/store/sql/conn.h"

#include "controller/store/pg/connection.h"

namespace kiln::db {

bool Dialect::violated(const Error& e, const Constraint& c) const {
  if (e.code != Code::kConflict) return false;
  if (engine == Engine::kPostgres) return pg::names_constraint(e, c.pg);
  // "sqlite: UNIQUE constraint failed: ports.node_id, ports.name (context)":
  // the columns of the index, between "failed: " and the context.
  const std::string_view m = e.message;
  constexpr std::string_view kFailed = "constraint failed: ";
  const std::size_t from = m.find(kFailed);
  if (from == std::string_view::npos) return false;
  std::string_view cols = m.substr(from + kFailed.size());
  cols = cols.substr(0, cols.find(" ("));
  if (cols == c.sqlite) return true;
  for (std::size_t at = 0; at <= cols.size();) {
    const std::size_t comma = cols.find(", ", at);
    const std::string_view one = cols.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (one == c.sqlite) return true;
    if (comma == std::string_view::npos) break;
    at = comma + 2;
  }
  return false;
}

const Dialect& sqlite_dialect() {
  static const Dialect d{Engine::kSqlite, "", ""};
  return d;
}

const Dialect& pg_dialect() {
  static const Dialect d{Engine::kPostgres, " FOR UPDATE", "SELECT pg_advisory_xact_lock($1)"};
  return d;
}

Result<nlohmann::json> json_column(const Rows& r, int col, std::string_view what) {
  if (r.is_null(col)) return nlohmann::json();
  nlohmann::json out = nlohmann::json::parse(r.text(col), nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return Error(Code::kInternal, "store: corrupt JSON in " + std::string(what));
  return out;
}

Status json_column_into(const Rows& r, int col, std::string_view what, nlohmann::json& out) {
  Result<nlohmann::json> j = json_column(r, col, what);
  if (!j) return j.take_error();
  out = std::move(*j);
  return ok_status();
}

Result<int64_t> query_int(Conn& c, std::string_view sql, const Binds& binds) {
  Result<Rows> r = c.query(sql, binds);
  if (!r) return r.take_error();
  Result<bool> row = r->next();
  if (!row) return row.take_error();
  if (!*row) return int64_t{0};
  return r->int64(0);
}

Status lock_tx(Conn& c, int64_t key) {
  const std::string_view sql = c.dialect().tx_lock;
  if (sql.empty()) return ok_status();
  Result<Rows> r = c.query(sql, Binds().add(key));
  if (!r) return r.take_error();
  Result<bool> row = r->next();  // the lock is taken when the statement has run
  if (!row) return row.take_error();
  return ok_status();
}

}  // namespace kiln::db
