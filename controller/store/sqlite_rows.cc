#include "controller/store/sqlite_rows.h"

namespace kiln::store_rows {

using json = nlohmann::json;

Result<json> parse_json_column(const sql::Statement& st, int col, std::string_view what) {
  if (st.column_is_null(col)) return json();
  json j = json::parse(st.column_text(col), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error(Code::kInternal, "store: corrupt JSON in " + std::string(what));
  return j;
}

bool mentions(const Error& e, std::string_view what) { return e.message.find(what) != std::string::npos; }

Result<int64_t> query_int(sql::Database& db, std::string_view sql, std::string_view arg) {
  Result<sql::StatementRef> st = db.prepare(std::string(sql));
  if (!st) return st.take_error();
  (*st)->bind(1, arg);
  Result<bool> row = (*st)->step();
  if (!row) return row.take_error();
  const int64_t n = *row ? (*st)->column_int64(0) : 0;
  (*st)->reset();
  return n;
}

Status run_with(sql::Database& db, std::string_view sql, std::string_view arg) {
  Result<sql::StatementRef> st = db.prepare(std::string(sql));
  if (!st) return st.take_error();
  (*st)->bind(1, arg);
  return (*st)->run();
}

}  // namespace kiln::store_rows
