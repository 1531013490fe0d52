#include "controller/store/pg/pg_node_rows.h"

#include "controller/store/pg/pg_conn.h"
#include "controller/store/sql/node_rows.h"

namespace kiln::pg_rows {

// Adapters from the PostgreSQL allocation flows (pg::Connection) to the one
// node row layout of sql/node_rows.h.

const std::string& node_select() { return node_rows::node_select(); }

Result<std::vector<Node>> read_nodes(const pg::Rows& rows) {
  db::Rows r = db::borrowed_rows(rows);
  return node_rows::read_nodes(r);
}

Status insert_node_row(pg::Connection& c, const Node& n) {
  db::PgConn conn(c);
  return node_rows::insert_node_row(conn, n);
}

Status write_node_row(pg::Connection& c, const Node& n, int64_t read_version) {
  db::PgConn conn(c);
  Result<int64_t> w = node_rows::update_node_row(conn, n, read_version);
  if (!w) return w.take_error();
  if (*w != 1)
    return Error(Code::kInternal, "store: node " + n.id + " changed under its row lock (version " +
                                      std::to_string(read_version) + ")");
  return ok_status();
}

}  // namespace kiln::pg_rows
