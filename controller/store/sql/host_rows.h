#pragma once
// Booking a virtual node's guest on a hypervisor host, inside a caller's
// write transaction (internal to controller/store): place_virtual_node
// (sql/hosts.cc, which defines these beside the HostStore flows) and a
// virtual allocation's claim (sql/allocation_claims.cc)
// book through these, so every booking follows the same rules and locks.
//
// Booking and its lock. Free capacity is a host's capacity minus its
// reservation rows, so two transactions must not plan on the same host's rows
// at once (the UNIQUE index on host, kind and item catches a CPU or GPU booked
// twice, but not amounts such as vcpus or memory, which are one row per
// guest). place_guest therefore reads the candidate hosts with the dialect's
// row lock (db::Dialect::for_update), in name order and in one statement,
// before reading their reservations; the locks last until the caller's
// transaction ends, so a second booker of the same host waits, then reads the
// first one's rows. SQLite needs no lock: its writer transaction excludes
// every other writer. delete_host takes the same lock, so it waits for
// bookers (and then counts their machines) and bookers wait for it (and then
// no longer see the host). Releasing capacity (deleting rows) takes no host
// lock: a booker that misses a release only sees less room than there is. A
// deadlock PostgreSQL detects (one transaction booked one named host and then
// every host, another did the reverse) is kUnavailable: retry.
//
// Errors from a failed statement (a constraint, a lost connection) leave a
// PostgreSQL transaction aborted: the caller must roll back. The others (no
// room, an unknown host, the planner's own errors) are decided before any
// statement fails, so the transaction stays usable: a claim may skip a guest
// that does not fit and go on.

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/result.h"
#include "controller/model/host.h"
#include "controller/model/node.h"
#include "controller/store/allocation_store.h"
#include "controller/store/host_store.h"
#include "controller/store/sql/conn.h"

namespace kiln::host_rows {

// The virtual machine's primary key, as each engine names it: a machine
// inserted by another transaction for the same node (PostgreSQL) violates it.
inline constexpr db::Constraint kVmNode{"virtual_machines.node_id", "virtual_machines_pkey"};

// The node's virtual machine row, if it has one; `lock` reads it with the
// dialect's row lock.
Result<std::optional<VirtualMachine>> guest_of(db::Conn& c, std::string_view node_id, bool lock = false);

// Books `vm`'s guest: locks the candidate hosts (`host` by UUID or name when
// not empty, else every host) as above, asks `planner` for each in name order
// (byte order, as SQLite compares text; store_rules::choose_host) and, on the
// first success, inserts `vm` with that host and placement and the plan's
// reservation rows. The caller checks first that the node has no machine
// (guest_of); one inserted meanwhile by another transaction fails the insert
// on kVmNode. kInvalidArgument naming /host for an unknown host; kConflict
// "no hypervisor host is registered", or joining every host's shortage;
// kInternal when a plan books a CPU or GPU that is already booked.
Result<VirtualMachine> place_guest(db::Conn& c, const VirtualMachine& vm, std::string_view host,
                                   const HostStore::PlacementPlanner& planner, int64_t now);

// A virtual allocation's guest for `n`, booked unless it has one (on the host
// its BMC options or its host field name, else any): ok, or kConflict naming
// what is short (the claim skips the node or gives up).
Status book_guest(db::Conn& c, const Node& n, const VirtualNodeMaker& vms, int64_t now);

// Gives back the booking of a guest never defined (no domain): deletes its
// virtual machine row (its reservations go with it, ON DELETE CASCADE). No
// host lock (releasing capacity needs none, above).
Status free_undefined_guest(db::Conn& c, std::string_view node_id);

}  // namespace kiln::host_rows
