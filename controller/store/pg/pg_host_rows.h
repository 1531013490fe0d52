#pragma once
// Hosts, their reservation rows and the virtual machines placed on them, as
// the PostgreSQL store reads and books them (internal to controller/store/pg):
// PgStore's HostStore (pg_hosts.cc) and any other aggregate that books a
// guest's capacity inside its own transaction (a virtual allocation's claim,
// as sqlite_host_rows.h serves sqlite_allocations.cc) use these, so every
// booking follows the same rules and the same locks.
//
// Booking and its lock. Free capacity is a host's capacity minus its
// reservation rows, so two transactions must not plan on the same host's rows
// at once (the UNIQUE index on host, kind and item catches a CPU or GPU booked
// twice, but not amounts such as vcpus or memory, which are one row per
// guest). Every booker therefore goes through place_guest, which locks the
// candidate host rows FOR NO KEY UPDATE, in name order and in one statement,
// before reading their reservations, and keeps the locks until the caller's
// transaction ends: a second booker of the same host waits, then reads the
// first one's rows. delete_host locks its row FOR UPDATE, so it waits for
// bookers (and then counts their machines) and bookers wait for it (and then
// no longer see the host). Releasing capacity (deleting rows) takes no host
// lock: a booker that misses a release only sees less room than there is.
// A deadlock PostgreSQL detects (a transaction that booked one named host and
// then every host, against one that did the reverse) is reported as
// kUnavailable by pg::Connection: retry.
//
// Threading: the connection's (one thread at a time). Every function runs
// inside the caller's transaction (pg::Transaction) and commits nothing.
// Errors that come from a failed statement (a constraint, a lost connection)
// leave that transaction aborted: the caller must roll back. The others
// (not found, no room, an unknown host, the planner's own errors) are decided
// before any statement fails, so the transaction stays usable: a claim may
// skip a guest that does not fit and go on.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/model/host.h"
#include "controller/store/host_store.h"
#include "controller/store/pg/connection.h"

namespace kiln::pg_rows {

// "SELECT <every hosts column> FROM hosts", in the order read_host reads them.
const std::string& host_select();
// Decodes row `row` of a result of host_select(). JSON columns that are not
// JSON read as defaults (store_rules::json_or_empty).
Host read_host(const pg::Rows& r, int row);

// "SELECT host_id, node_id, kind, item, amount FROM host_reservations".
const std::string& reservation_select();
HostReservation read_reservation(const pg::Rows& r, int row);

// "SELECT <every virtual_machines column> FROM virtual_machines".
const std::string& vm_select();
VirtualMachine read_vm(const pg::Rows& r, int row);

// The host by UUID (any case), or by name when `id_or_name` is not a UUID;
// no lock. kNotFound "host X not found".
Result<Host> host_by(pg::Connection& c, std::string_view id_or_name);
// Every host, by name in byte order (as SQLite orders them); no lock.
Result<std::vector<Host>> hosts_by_name(pg::Connection& c);
// The reservation rows of `host_id`, by kind then item (byte order).
Result<std::vector<HostReservation>> reservations_of(pg::Connection& c, std::string_view host_id);
// The node's virtual machine row, if it has one.
Result<std::optional<VirtualMachine>> guest_of(pg::Connection& c, std::string_view node_id);

// Books `vm`'s guest: locks the candidate hosts (`host` by UUID or name when
// not empty, else every host, by name) as the paragraph above says, asks
// `planner` for each in turn (store_rules::choose_host) and, on the first
// success, inserts `vm` with that host and placement and the plan's
// reservation rows. The caller checks first that the node has no machine
// (guest_of); a machine inserted meanwhile by another transaction surfaces as
// kConflict naming the constraint "virtual_machines_pkey" (and aborts the
// transaction). Errors as sqlite_host_rows.h's place_guest: kInvalidArgument
// naming /host for an unknown host; kConflict "no hypervisor host is
// registered", or joining every host's shortage; kInternal when a plan books
// a CPU or GPU that is already booked.
Result<VirtualMachine> place_guest(pg::Connection& c, const VirtualMachine& vm, std::string_view host,
                                   const HostStore::PlacementPlanner& planner, int64_t now);

// Gives back the booking of a guest never defined (no domain): deletes its
// virtual machine row (its reservations go with it, ON DELETE CASCADE). No
// host lock (releasing capacity needs none, above).
Status free_undefined_guest(pg::Connection& c, std::string_view node_id);

}  // namespace kiln::pg_rows
