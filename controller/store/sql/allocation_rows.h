#pragma once
// Allocation rows over the SQL seam (internal to controller/store): the one
// list of allocations columns (kAllocationColumns in allocation_rows.cc: each
// names a column, binds an Allocation's field and reads it back), the reads
// and writes built on it, and the row locks the allocation transactions take.
// Used by the AllocationStore's flows: sql/allocations.cc (get, list,
// update), sql/allocation_claims.cc (create, claim, leave) and
// sql/allocations_in_flight.cc (the engine's reads).
//
// Members read back in the order they joined: joined_at, then `ord`, the
// member's place in its allocation, written by the claim in the order it took
// the nodes (schemas/sql/<dialect>/023_member_order.sql).
//
// Every function runs inside the caller's transaction or read on `c` and
// returns the connection's errors as they are (a failed statement leaves a
// PostgreSQL transaction aborted: the caller rolls back).

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "controller/model/allocation.h"
#include "controller/model/node.h"
#include "controller/store/sql/conn.h"

namespace kiln::allocation_rows {

// What the allocation transactions spell differently per engine.
struct ClaimSql {
  // Appended to a SELECT of rows a claim, a replacement or a departure will
  // update (the locks of sql/allocation_claims.cc); "" on SQLite, whose
  // writer is alone.
  const char* lock;
  // "The node has every trait of the JSON array $3": jsonb containment on
  // PostgreSQL, json_each on SQLite. Both are guarded by $3 = '[]', so an
  // allocation without traits never parses a node's column.
  const char* has_traits;
};

const ClaimSql& claim_sql(db::Engine engine);
inline const ClaimSql& claim_sql(const db::Conn& c) { return claim_sql(c.dialect().engine); }

// A claim's quota check: the tenant's max_nodes for profile $2 and kind $3
// (NULL: no quota) and how many nodes of them tenant $1 holds now, counted in
// the index nodes_by_tenant_profile (026_history_lookups) rather than by
// reading every node of the profile.
extern const char kQuotaAndUseSql[];

// The claim's SELECT of the claimable nodes of profile $1 and kind $2 with
// every trait of the JSON array $3, never a former member of allocation $4,
// oldest first, each row locked (ClaimSql::lock), at most $5 when `limited`.
// Read through the partial index nodes_claimable (026_history_lookups), so a
// claim passes over no node that is in use, however many are.
std::string claimable_nodes_sql(db::Engine engine, bool limited);

// Allocations (or nodes) one query reads by id, its binds well under both
// engines' limits on parameters.
inline constexpr std::size_t kMembersPerQuery = 500;

// The rows of an allocation name (AllocationRef::name, $1), of tenant $2
// unless it is '': key columns only (id, tenant, released, created_at: an
// AllocationMatch), since a name a CI job reuses may have many released rows.
// Read through allocations_by_name (026_history_lookups), not by testing
// every allocation ever made.
extern const char kAllocationsNamedSql[];

// The allocations still in flight (allocation_store.h): not released, and
// not failed unless a member has yet to leave. Spelled as the states it takes
// (every other state in kAllAllocationStates) so that both engines read them
// through allocations_state; released and failed rows only accumulate.
const std::string& in_flight_condition();

// "$k, $k+1, ..." for `values`, each bound in order onto `b`: an IN list.
std::string in_list(db::Binds& b, std::span<const std::string> values);
// Runs `per_batch` over `values` kMembersPerQuery at a time (binds well under
// both engines' limits on parameters); stops at the first error.
Status in_batches(const std::vector<std::string>& values,
                  const std::function<Status(std::span<const std::string>)>& per_batch);

// The nodes of the members of `all` that have not left, kMembersPerQuery ids
// a query (a deleted node is simply absent).
Result<std::vector<Node>> select_member_nodes(db::Conn& c, std::span<const Allocation> all);

// Decodes the current row of a SELECT of every allocations column in table
// order (select_allocations' columns). Members are not filled.
Result<Allocation> read_allocation(const db::Rows& r);

// Inserts `a`'s row, or writes every column of it by id. kConflict naming
// /name when a live allocation of the tenant has its name.
Status write_allocation(db::Conn& c, const Allocation& a, bool insert);

// Fills the members of every allocation in `all`, each in the order they
// joined: one query per kMembersPerQuery allocations, not one per
// allocation (a list page of 100 made 101 round trips to the database).
Status load_members(db::Conn& c, std::span<Allocation> all);
Status load_members(db::Conn& c, Allocation& a);

// Allocations (members filled) for `tail` (WHERE ... ORDER BY ..., and a
// lock), its parameters in `binds`.
Result<std::vector<Allocation>> select_allocations(db::Conn& c, const std::string& tail, const db::Binds& binds);

// The allocation `id`, its row locked (ClaimSql::lock) until the transaction
// ends. kNotFound.
Result<Allocation> lock_allocation(db::Conn& c, std::string_view id);

// Locks the tenant's row (when it has one) until the transaction ends: the
// tenant's claims and its deletion run one after another
// (sql/allocation_claims.cc). Nothing to do on SQLite.
Status lock_tenant(db::Conn& c, std::string_view tenant);
// lock_tenant for the tenant of allocation `id` (none when it does not exist).
Status lock_tenant_of(db::Conn& c, std::string_view id);

}  // namespace kiln::allocation_rows
