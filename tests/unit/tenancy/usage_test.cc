// Metering: prices in micro-units, whole seconds, totals that add up.
#include <catch2/catch.hpp>

#include <limits>

#include "controller/tenancy/usage.h"

using namespace kiln;
using json = nlohmann::json;

TEST_CASE("usage: the profile's price per second in micro-units, 0 when it has none", "[usage]") {
  json doc = {{"price", {{"baremetal_per_second", 0.0066}, {"virtual_per_second", nullptr}}}};
  CHECK(price_micros_per_second(doc, NodeKind::kBaremetal) == 6600);
  CHECK(price_micros_per_second(doc, NodeKind::kVirtual) == 0);
  CHECK(price_micros_per_second(json::object(), NodeKind::kBaremetal) == 0);
  CHECK(price_micros_per_second({{"price", {{"baremetal_per_second", -1}}}}, NodeKind::kBaremetal) == 0);
  CHECK(price_micros_per_second({{"price", {{"baremetal_per_second", 0.00001}}}}, NodeKind::kBaremetal) == 10);
}

TEST_CASE("usage: whole seconds inside the window, open rows up to now, totals per allocation", "[usage]") {
  UsageRecord closed;
  closed.allocation = "a1";
  closed.node_id = "n1";
  closed.started_at = 10'000;
  closed.ended_at = 25'999;  // 15.999 s: 15 billed
  closed.price_micros_per_second = 6600;
  UsageRecord open = closed;
  open.node_id = "n2";
  open.ended_at.reset();
  open.started_at = 20'000;
  UsageRecord other = closed;
  other.allocation = "a2";
  other.price_micros_per_second = 10;

  CHECK(*billed_seconds(closed, 0, 0, 99'000) == 15);
  CHECK(*billed_seconds(open, 0, 0, 30'500) == 10);
  CHECK(*billed_seconds(closed, 20'000, 0, 99'000) == 5);   // window starts inside
  CHECK(*billed_seconds(closed, 0, 12'000, 99'000) == 2);   // window ends inside
  CHECK(*billed_seconds(closed, 30'000, 40'000, 99'000) == 0);

  Result<json> made = usage_document({closed, open, other}, 0, 0, 30'500);
  REQUIRE(made);
  const json& doc = *made;
  REQUIRE(doc["usage"].size() == 3);
  CHECK(doc["usage"][0]["cost_micros"] == 15 * 6600);
  CHECK(doc["usage"][1]["ended_at"].is_null());
  CHECK(doc["usage"][1]["cost_micros"] == 10 * 6600);
  CHECK(doc["totals"]["allocations"]["a1"]["cost_micros"] == 25 * 6600);
  CHECK(doc["totals"]["allocations"]["a2"]["cost_micros"] == 15 * 10);
  CHECK(doc["totals"]["cost_micros"] == 25 * 6600 + 150);
  CHECK(doc["totals"]["seconds"] == 40);
}

namespace {

UsageRecord row_of(const std::string& allocation, int64_t started_ms, int64_t ended_ms, int64_t price) {
  UsageRecord r;
  r.allocation = allocation;
  r.node_id = "n-" + allocation;
  r.started_at = started_ms;
  r.ended_at = ended_ms;
  r.price_micros_per_second = price;
  return r;
}

}  // namespace

TEST_CASE("usage: the dearest price over the longest period fits, and a longer or dearer row is refused, never wrapped",
          "[usage]") {
  // The profile bound and the ledger's agree: the input check (profile_input.cc)
  // allows kMaxPricePerSecond, which reads back as kMaxPriceMicrosPerSecond.
  CHECK(price_micros_per_second({{"price", {{"baremetal_per_second", kMaxPricePerSecond}}}}, NodeKind::kBaremetal) ==
        kMaxPriceMicrosPerSecond);
  // A stored price from before the bound was checked reads as the bound.
  CHECK(price_micros_per_second({{"price", {{"baremetal_per_second", 1e6}}}}, NodeKind::kBaremetal) ==
        kMaxPriceMicrosPerSecond);
  CHECK(price_micros_per_second({{"price", {{"baremetal_per_second", 1e300}}}}, NodeKind::kBaremetal) ==
        kMaxPriceMicrosPerSecond);

  // At the bounds: exact, no wrap.
  const int64_t t0 = 1'700'000'000'000;
  UsageRecord longest = row_of("a1", t0, t0 + kMaxMeteredSeconds * 1000, kMaxPriceMicrosPerSecond);
  REQUIRE(*billed_seconds(longest, 0, 0, t0) == kMaxMeteredSeconds);
  Result<json> doc = usage_document({longest}, 0, 0, t0);
  REQUIRE(doc);
  CHECK((*doc)["usage"][0]["cost_micros"].get<int64_t>() == kMaxMeteredSeconds * kMaxPriceMicrosPerSecond);
  CHECK((*doc)["totals"]["cost_micros"].get<int64_t>() == kMaxMeteredSeconds * kMaxPriceMicrosPerSecond);

  // One second longer: corrupt times, 422, no bill.
  UsageRecord too_long = row_of("a1", t0, t0 + (kMaxMeteredSeconds + 1) * 1000, kMaxPriceMicrosPerSecond);
  Result<int64_t> s = billed_seconds(too_long, 0, 0, t0);
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kUnprocessable);
  // Times whose difference does not even fit an int64.
  UsageRecord wild = row_of("a1", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 1);
  CHECK(billed_seconds(wild, std::numeric_limits<int64_t>::min(), 0, 0).error().code == Code::kUnprocessable);

  // A row priced above the bound (an old or corrupt row) whose product wraps:
  // 422 naming the window, not a negative bill.
  UsageRecord dear = row_of("a1", t0, t0 + 10'000'000'000LL, 1'000'000'000'000);  // 1e7 s × 1e12
  Result<json> wrapped = usage_document({dear}, 0, 0, t0);
  REQUIRE_FALSE(wrapped);
  CHECK(wrapped.error().code == Code::kUnprocessable);
  REQUIRE(wrapped.error().fields.size() == 2);
  CHECK(wrapped.error().fields[0].field == "from");
  CHECK(wrapped.error().fields[1].field == "to");

  // Totals: three rows that each fit but whose sum does not.
  std::vector<UsageRecord> three = {longest, longest, longest};
  three[1].allocation = "a2";
  three[2].allocation = "a3";
  Result<json> summed = usage_document(three, 0, 0, t0);
  REQUIRE_FALSE(summed);
  CHECK(summed.error().code == Code::kUnprocessable);
  CHECK_THAT(summed.error().message, Catch::Contains("total cost"));
  // Two such rows of one allocation: its own sum is the first that wraps.
  std::vector<UsageRecord> same = {longest, longest};
  Result<json> one_allocation = usage_document(same, 0, 0, t0);
  REQUIRE_FALSE(one_allocation);
  CHECK_THAT(one_allocation.error().message, Catch::Contains("allocation a1"));
}
