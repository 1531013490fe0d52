#pragma once
// Which allocation holds a node: the one home of the rule that writes
// node.tenant and node.allocation, and of "does this node still belong to
// that allocation". The store applies it when an allocation claims or lets
// go of a node (sql/allocation_claims.cc), the conductor when a verb moves a node
// towards a tenant or back to the pool (conductor/operations.cc), and the
// allocation engine reads belongs_to to decide whether a member has left.
//
// A node is held by an allocation in two steps: the claim sets tenant and
// allocation together; a deploy verb may name the allocation again (and
// undeploy, provide and manage clear it) while the tenant stays until the
// allocation detaches the node. So "belongs to" accepts a node whose
// allocation was cleared by an undeploy, as long as the tenant still matches.
//
// Which nodes a new allocation may claim is one SQL condition,
// store_rules::kClaimableNodeSql, read by the claim and by
// NodeStore::count_free_nodes.
//
// Pure: no I/O; callers read and write the node.

#include <cstdint>
#include <string>

#include "controller/model/allocation.h"
#include "controller/model/node.h"
#include "controller/model/state_machine.h"  // ProvisionEvent

namespace kiln {

// Whether `n` still belongs to `a`: it names `a` (or no allocation: an
// undeploy cleared it) and `a`'s tenant.
bool belongs_to(const Node& n, const Allocation& a);

// `n` claimed by `a`: tenant and allocation set, and last_validation cleared
// (none of its reports is the new tenant's: validation_store.h).
void claim_node(Node& n, const Allocation& a);

// `n` let go by its allocation: tenant and allocation cleared.
void detach_node(Node& n);

// node.allocation as provision verb `verb` leaves it: a deploy names the
// allocation it was given (`allocation`, empty for a direct deploy); the
// verbs back towards the pool (undeploy, provide, manage) clear it; any other
// verb leaves it alone.
void allocation_after_verb(Node& n, ProvisionEvent verb, const std::string& allocation);

}  // namespace kiln
