#pragma once
// Node rows for the SQLite allocation flows (internal to controller/store):
// they claim and detach nodes on the writer's transaction with statements
// bound by index; these adapt them to the one node row layout
// (sql/node_rows.h, which they can use directly once written over the seam).

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/model/node.h"
#include "controller/store/sqlite.h"

namespace kiln::store_rows {

// Node rows (ports not filled) matching `where` (SQL after WHERE, may end with
// ORDER BY / LIMIT), with `bind` setting its parameters.
Result<std::vector<Node>> select_node_rows(sql::Database& db, const std::string& where,
                                           const std::function<void(sql::Statement&)>& bind);
// Writes every column of `n` to its row (by id). The caller bumps version by
// one (as store_rules' claimed() and detached() do) and updated_at and appends
// the events, inside its transaction.
Status write_node_row(sql::Database& db, const Node& n);
// Inserts `n` (no ports) as a new row; the caller fills id, timestamps and
// version and appends the events, inside its transaction.
Status insert_node_row(sql::Database& db, const Node& n);

}  // namespace kiln::store_rows
