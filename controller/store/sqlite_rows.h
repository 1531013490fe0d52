#pragma once
// Row helpers shared by the SQLite store's files (sqlite_*.cc). Internal to
// controller/store: JSON columns, collecting rows, checked page limits.

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/store/sqlite.h"
#include "controller/store/store_rules.h"

namespace kiln::store_rows {

// Shared with the PostgreSQL store (store_rules.h).
using store_rules::checked_limit;
using store_rules::json_text;

// A JSON column: null when NULL; kInternal "store: corrupt JSON in <what>".
Result<nlohmann::json> parse_json_column(const sql::Statement& st, int col, std::string_view what);

// Whether SQLite's message names `what` (a constraint: "nodes.name", ...):
// how a constraint violation is turned into the field it is about.
bool mentions(const Error& e, std::string_view what);

// The integer the one-row query `sql` (with ?1 bound to `arg`) returns: a
// count(*) behind a refusal ("is used by 3 nodes"); 0 when it returns no row.
Result<int64_t> query_int(sql::Database& db, std::string_view sql, std::string_view arg);

// Runs the statement `sql` with ?1 bound to `arg` (a DELETE or UPDATE by key).
Status run_with(sql::Database& db, std::string_view sql, std::string_view arg);


// Collects every row of `st` with `read` (which returns T or Result<T>).
template <typename T, typename Read>
Result<std::vector<T>> collect(sql::Statement& st, Read read) {
  std::vector<T> out;
  for (;;) {
    Result<bool> row = st.step();
    if (!row) return row.take_error();
    if (!*row) return out;
    if constexpr (std::is_same_v<decltype(read(st)), T>) {
      out.push_back(read(st));
    } else {
      auto v = read(st);
      if (!v) return v.take_error();
      out.push_back(std::move(*v));
    }
  }
}

}  // namespace kiln::store_rows
