#pragma once
// usage-equals-metered-lifetime: the bill held to the allocations' own
// history, once every allocation is released.
//
// docs/tenancy.md's rule: a member is billed from the moment its allocation
// became ready while it was a member (the allocation's history entry into
// ready) until the allocation started giving back (its entry into failed or
// releasing), or, for a member replaced while the allocation ran, until the
// replacement was decided (before the member left: left_at). Each row bills
// whole seconds of that span. So, for every member of every allocation:
//   * exactly one usage row when the allocation became ready while it was a
//     member, none otherwise;
//   * the row starts at that ready entry, to the millisecond;
//   * the row has ended, at a give-back entry to the millisecond, or, for a
//     member replaced (or whose replacement was refused), between its start
//     and its left_at and before the give-back;
//   * the row's seconds are (end - start) / 1000, and the allocation's total
//     is the sum of its rows;
// and no row bills a node that never was a member.
//
// Blocking; the soak's driving thread.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/soak/api_client.h"
#include "bench/soak/findings.h"

namespace kiln::soak {

// Checks `allocations` (GET /v1/allocations as staff) against `usage` (GET
// /v1/usage as staff). Returns figures for the report (allocations,
// members, rows, billed seconds). Pure.
nlohmann::json audit_usage_documents(const nlohmann::json& allocations, const nlohmann::json& usage,
                                     Findings& findings);

// Reads both with `admin_token` and audits them; a read that fails is a
// finding, not an exception.
nlohmann::json audit_usage(ApiClient& api, Findings& findings, const std::string& admin_token);

}  // namespace kiln::soak
