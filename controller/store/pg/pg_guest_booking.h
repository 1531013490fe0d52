#pragma once
// Host capacity booked inside an allocation's claim transaction on PostgreSQL
// (internal to controller/store/pg; allocation_store.h, "Virtual
// allocations"): the PgStore counterpart of sqlite_host_rows.h, with the same
// rows and checks. Only what a claim needs; PgStore's HostStore (and its host
// row decoder, pg_host_rows.h) is written apart, and this file is to be folded
// into it.
//
// Locking. SQLite books under its single writer. Here several kilnd book at
// once, so place_guest first locks every host row (FOR NO KEY UPDATE: it
// conflicts with itself and with FOR UPDATE, not with the key-share locks of
// the foreign keys that point at a host), in name order,
// and only then reads the reservations it plans against: two transactions
// booking capacity are serialized on the host rows (the later one reads the
// earlier one's rows once it commits, READ COMMITTED), and since every booking
// transaction takes them in the same order, two claims cannot deadlock on
// them. The UNIQUE index on (host_id, kind, item) stays the second line of
// defence.

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/result.h"
#include "controller/model/host.h"
#include "controller/store/host_store.h"
#include "controller/store/pg/connection.h"

namespace kiln::pg_rows {

// The node's virtual machine row, if it has one.
Result<std::optional<VirtualMachine>> guest_of(pg::Connection& c, std::string_view node_id);

// Inside the caller's transaction: locks the host rows (above), asks
// `planner` for each candidate host (`host`, by id or name, when not empty,
// else every host by name) and on the first success inserts `vm` with that
// host and placement and the plan's reservation rows. The caller checks
// first that the node has no machine. kInvalidArgument naming /host for an
// unknown host; kConflict "no hypervisor host is registered", or joining
// every host's shortage ("no host has room for this node: ...").
Result<VirtualMachine> place_guest(pg::Connection& c, const VirtualMachine& vm, std::string_view host,
                                   const HostStore::PlacementPlanner& planner, int64_t now);

// Gives back the booking of a guest never defined (no domain): deletes its
// virtual machine row (its reservations go with it, ON DELETE CASCADE).
Status free_undefined_guest(pg::Connection& c, std::string_view node_id);

}  // namespace kiln::pg_rows
