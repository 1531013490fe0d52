#pragma once
// The TenantAccessLookup (workflow.h) over the allocation store: what
// main.cc puts in ConductorOptions::tenant_access once kilnd has an
// AllocationStore, so a deploying member's config drive carries its
// allocation's ssh_keys and user_data.
//
// Thread: the lookup runs on any I/O thread; the store read runs on `db`.
// Errors: the store's get_allocation ones, kNotFound included (the workflow
// then writes a drive without keys).

#include "common/blocking_pool.h"
#include "controller/conductor/workflow.h"
#include "controller/store/allocation_store.h"

namespace kiln {

// `store` and `db` must outlive the lookup (and every Conductor holding it).
TenantAccessLookup tenant_access_from(AllocationStore& store, BlockingPool& db);

}  // namespace kiln
