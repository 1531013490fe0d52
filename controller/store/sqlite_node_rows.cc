#include "controller/store/sqlite_node_rows.h"

#include <utility>

#include "controller/store/sql/node_rows.h"
#include "controller/store/sql/sqlite_conn.h"

namespace kiln::store_rows {

// Adapters from the SQLite allocation flows (sql::Database, statements bound
// by index) to the one node row layout of sql/node_rows.h.

Result<std::vector<Node>> select_node_rows(sql::Database& db, const std::string& where,
                                           const std::function<void(sql::Statement&)>& bind) {
  Result<sql::StatementRef> st = db.prepare(node_rows::node_select() + " WHERE " + where);
  if (!st) return st.take_error();
  if (bind) bind(**st);
  db::Rows rows = db::statement_rows(std::move(*st));
  return node_rows::read_nodes(rows);
}

Status write_node_row(sql::Database& db, const Node& n) {
  db::SqliteConn c(db);
  // The one writer holds the row: it still has the version the caller read,
  // one below the bumped one it writes.
  Result<int64_t> w = node_rows::update_node_row(c, n, n.version - 1);
  if (!w) return w.take_error();
  if (*w != 1) return Error(Code::kInternal, "store: node " + n.id + " changed under the writer");
  return ok_status();
}

Status insert_node_row(sql::Database& db, const Node& n) {
  db::SqliteConn c(db);
  return node_rows::insert_node_row(c, n);
}

}  // namespace kiln::store_rows
