#pragma once
// A new allocation as tenancy starts it: what every allocation is when it is
// first written, whoever asked (the API's POST /v1/allocations, a CI
// pipeline's `kiln cluster up`, a future scheduler). The caller decides whose
// it is (a tenant token's own tenant; the tenant a staff token names) and
// checks the references (tenant, profile, image) inside its store call;
// this fills the rest. Pure: no I/O.

#include <cstdint>
#include <string>

#include "controller/model/allocation.h"
#include "controller/store/event_log.h"

namespace kiln {

// Who asked, for the allocation.created event.
struct AllocationAsker {
  std::string name;        // the token's name
  std::string role;        // admin | operator | tenant
  std::string request_id;  // the API request, when there is one
};

// `requested` (name, profile, kind, count, image, lease_seconds, ... as the
// request gave them) for `tenant` at `now_ms`: a fresh id, a name when none
// was given ("alloc-" and the id's first 8 characters), state pending with
// its first history row, and expires_at when a lease was asked for.
Allocation new_allocation(Allocation requested, const std::string& tenant, int64_t now_ms);

// The allocation.created event of `a`, which `asker` asked for.
EventDraft allocation_created_event(const Allocation& a, const AllocationAsker& asker);

}  // namespace kiln
