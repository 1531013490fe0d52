#pragma once
// Node rows for the PostgreSQL allocation flows (internal to
// controller/store/pg): they claim, detach and make nodes inside their own
// transaction on a pg::Connection; these adapt them to the one node row
// layout (sql/node_rows.h, which they can use directly once written over the
// seam).

#include <string>
#include <vector>

#include "common/result.h"
#include "controller/model/node.h"
#include "controller/store/pg/connection.h"

namespace kiln::pg_rows {

// "SELECT <every node column> FROM nodes" (ports are not read).
const std::string& node_select();
// Decodes every row of a node_select() query.
Result<std::vector<Node>> read_nodes(const pg::Rows& rows);
// Inserts `n` (no ports); the caller fills id, timestamps and version and
// appends the events, inside its transaction. kConflict naming /name or /id
// on a clash.
Status insert_node_row(pg::Connection& c, const Node& n);
// Writes every column of `n` to its row while the row still has version
// `read_version` (the caller holds the row lock, so it does; kInternal if
// not). The caller bumps version and updated_at and appends the events.
Status write_node_row(pg::Connection& c, const Node& n, int64_t read_version);

}  // namespace kiln::pg_rows
