#pragma once
// Virtual machine placement for the SQLite store's other aggregates (internal
// to controller/store): a virtual allocation books its guests' capacity in
// the claim's own writer transaction (allocation_store.h), with the same rows
// and checks as place_virtual_node (sqlite_hosts.cc).

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/result.h"
#include "controller/model/host.h"
#include "controller/store/host_store.h"
#include "controller/store/sqlite.h"

namespace kiln::store_rows {

// The node's virtual machine row, if it has one.
Result<std::optional<VirtualMachine>> guest_of(sql::Database& db, std::string_view node_id);

// Inside the caller's writer transaction: asks `planner` for each candidate
// host (`host` when not empty, else every host by name) and on the first
// success inserts `vm` with that host and placement and the plan's
// reservation rows. The caller checks first that the node has no machine.
// kInvalidArgument naming /host for an unknown host; kConflict joining every host's
// shortage ("no host has room for this node: host a: needs 4 vcpus, 2 free").
Result<VirtualMachine> place_guest(sql::Database& db, const VirtualMachine& vm, std::string_view host,
                                   const HostStore::PlacementPlanner& planner, int64_t now);

}  // namespace kiln::store_rows
