#pragma once
// Node rows over the SQL seam (internal to controller/store): the one list of
// node columns (kNodeColumns in node_rows.cc: each names a column, binds a
// Node's field and reads it back) behind every SELECT, INSERT and UPDATE of
// the nodes table on both engines. Used by sql/nodes.cc and by the
// allocation transactions that claim, make and detach nodes
// (sql/allocation_claims.cc).

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "controller/model/node.h"
#include "controller/store/node_repo.h"
#include "controller/store/sql/conn.h"

namespace kiln::node_rows {

// "SELECT <every node column> FROM nodes" (ports are not read).
const std::string& node_select();
// Decodes the current row of a node_select() query (ports not filled).
Result<Node> read_node(const db::Rows& r);
// Every row of a node_select() query.
Result<std::vector<Node>> read_nodes(db::Rows& r);

// "SELECT <the PowerSyncNode columns> FROM nodes" (node_repo.h).
const std::string& power_sync_select();
// Every row of a power_sync_select() query, each column decoded by the same
// reader as in a whole node.
Result<std::vector<PowerSyncNode>> read_power_sync_nodes(db::Rows& r);

// Inserts `n` (no ports); the caller fills id, timestamps and version and
// appends the events, inside its transaction. kConflict naming /name or /id
// on a clash.
Status insert_node_row(db::Conn& c, const Node& n);
// Writes every column of `n` to its row while the row still has version
// `read_version`: the rows written, 0 when another writer changed it first.
// kConflict naming /name on a clash. The caller bumps version and updated_at
// and appends the events.
Result<int64_t> update_node_row(db::Conn& c, const Node& n, int64_t read_version);

// Node counts per (profile, kind), as tenant usage and the free pool report them.
using ProfileKindCounts = std::map<std::pair<std::string, NodeKind>, int64_t>;
// Adds the current row of a "SELECT ..., profile, kind, count(*) ... GROUP BY
// profile, kind" query, its profile in column `first`, to `out`. kInternal
// for a kind this binary does not know.
Status add_profile_kind_count(const db::Rows& row, int first, ProfileKindCounts& out);

}  // namespace kiln::node_rows
