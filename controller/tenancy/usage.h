#pragma once
// Metering: what a usage row costs. Money is integer micro-units (a
// millionth of the price's currency unit) so sums never drift; time is billed
// by the whole second, each row's seconds times its price, so a tenant can
// check every figure by hand.
//
// Every figure is an int64 and none may wrap: a wrapped cost is a bill that
// is silently wrong (or negative). Two bounds make one row's cost fit by
// construction — the dearest price a profile may ask (checked where profiles
// are written, controller/api/profile_input.cc, naming /price/...) and the
// longest period one row may bill — and the arithmetic is checked anyway
// (__builtin_*_overflow), because a ledger row may predate the bound or be
// corrupt, and because a window's totals add many rows.
//
// Pure: no I/O, thread-safe.

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/store/allocation_store.h"

namespace kiln {

// The dearest price per second a profile may ask, per node: 1,000 currency
// units a second (3.6 million an hour), far above any GPU server's price in
// any currency in use, and still small enough that the longest period fits.
inline constexpr int64_t kMaxPriceMicrosPerSecond = 1'000'000'000;
// The same bound in currency units, as a profile document writes prices.
inline constexpr double kMaxPricePerSecond = 1000.0;
// The longest period one usage row may bill: 200 years of 366 days. A row
// runs from hand-off to release and a lease (at most a year, renewable) or
// no lease at all does not bound it, so the bound is one no real row reaches.
inline constexpr int64_t kMaxMeteredSeconds = 200LL * 366 * 24 * 3600;
static_assert(kMaxPriceMicrosPerSecond <= std::numeric_limits<int64_t>::max() / kMaxMeteredSeconds,
              "the dearest price times the longest metered period must fit in int64 micro-units");
static_assert(static_cast<int64_t>(kMaxPricePerSecond * 1e6) == kMaxPriceMicrosPerSecond);

// The profile document's listed price per second for `kind`:
// doc.price.<kind>_per_second ("baremetal_per_second") when it is a number,
// else nullptr. The one reader of that key (availability, unit prices and the
// ledger all go through it).
const nlohmann::json* listed_price_per_second(const nlohmann::json& profile_doc, NodeKind kind);

// The listed price for `kind` in micro-units per second, rounded to the
// nearest micro; 0
// when the profile has none (shown as such, never guessed). A stored price
// above kMaxPriceMicrosPerSecond (written before the bound was checked) is
// read as the bound, so every row the ledger opens can be costed.
int64_t price_micros_per_second(const nlohmann::json& profile_doc, NodeKind kind);

// Whole seconds billed for `row` within [from_ms, to_ms) (to_ms 0: no
// bound), counting an open row up to `now_ms`. kUnprocessable when the
// period is longer than kMaxMeteredSeconds (or its length does not fit an
// int64): the row's times are corrupt, and no bill is made from them.
Result<int64_t> billed_seconds(const UsageRecord& row, int64_t from_ms, int64_t to_ms, int64_t now_ms);

// seconds × price, kUnprocessable when the product does not fit an int64.
Result<int64_t> row_cost_micros(const UsageRecord& row, int64_t seconds);

// The GET /v1/usage document: {"usage": [rows], "totals": {"seconds",
// "cost_micros", "allocations": {id: {"seconds", "cost_micros"}}}}. Rows show
// started_at/ended_at as RFC 3339 (ended_at null while open). kUnprocessable
// naming "from" and "to" when a row's cost or a total does not fit an int64
// (a shorter window bills less), or when a row is corrupt (billed_seconds).
Result<nlohmann::json> usage_document(const std::vector<UsageRecord>& rows, int64_t from_ms, int64_t to_ms,
                                      int64_t now_ms);

}  // namespace kiln
