#pragma once
// Metering: what a usage row costs. Money is integer micro-units (a
// millionth of the price's currency unit) so sums never drift; time is billed
// by the whole second, each row's seconds times its price, so a tenant can
// check every figure by hand.
//
// Pure: no I/O, thread-safe.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/store/allocation_store.h"

namespace kiln {

// The profile's price per second for `kind` ("baremetal" | "virtual") in
// micro-units: doc.price.<kind>_per_second rounded to the nearest micro; 0
// when the profile has none (shown as such, never guessed).
int64_t price_micros_per_second(const nlohmann::json& profile_doc, const std::string& kind);

// Whole seconds billed for `row` within [from_ms, to_ms) (to_ms 0: no
// bound), counting an open row up to `now_ms`.
int64_t billed_seconds(const UsageRecord& row, int64_t from_ms, int64_t to_ms, int64_t now_ms);

// The GET /v1/usage document: {"usage": [rows], "totals": {"seconds",
// "cost_micros", "allocations": {id: {"seconds", "cost_micros"}}}}. Rows show
// started_at/ended_at as RFC 3339 (ended_at null while open).
nlohmann::json usage_document(const std::vector<UsageRecord>& rows, int64_t from_ms, int64_t to_ms, int64_t now_ms);

}  // namespace kiln
