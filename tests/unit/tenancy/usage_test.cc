// Metering: prices in micro-units, whole seconds, totals that add up.
#include <catch2/catch.hpp>

#include "controller/tenancy/usage.h"

using namespace kiln;
using json = nlohmann::json;

TEST_CASE("usage: the profile's price per second in micro-units, 0 when it has none", "[usage]") {
  json doc = {{"price", {{"baremetal_per_second", 0.0066}, {"virtual_per_second", nullptr}}}};
  CHECK(price_micros_per_second(doc, "baremetal") == 6600);
  CHECK(price_micros_per_second(doc, "virtual") == 0);
  CHECK(price_micros_per_second(json::object(), "baremetal") == 0);
  CHECK(price_micros_per_second({{"price", {{"baremetal_per_second", -1}}}}, "baremetal") == 0);
  CHECK(price_micros_per_second({{"price", {{"baremetal_per_second", 0.00001}}}}, "baremetal") == 10);
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

  CHECK(billed_seconds(closed, 0, 0, 99'000) == 15);
  CHECK(billed_seconds(open, 0, 0, 30'500) == 10);
  CHECK(billed_seconds(closed, 20'000, 0, 99'000) == 5);   // window starts inside
  CHECK(billed_seconds(closed, 0, 12'000, 99'000) == 2);   // window ends inside
  CHECK(billed_seconds(closed, 30'000, 40'000, 99'000) == 0);

  json doc = usage_document({closed, open, other}, 0, 0, 30'500);
  REQUIRE(doc["usage"].size() == 3);
  CHECK(doc["usage"][0]["cost_micros"] == 15 * 6600);
  CHECK(doc["usage"][1]["ended_at"].is_null());
  CHECK(doc["usage"][1]["cost_micros"] == 10 * 6600);
  CHECK(doc["totals"]["allocations"]["a1"]["cost_micros"] == 25 * 6600);
  CHECK(doc["totals"]["allocations"]["a2"]["cost_micros"] == 15 * 10);
  CHECK(doc["totals"]["cost_micros"] == 25 * 6600 + 150);
  CHECK(doc["totals"]["seconds"] == 40);
}
