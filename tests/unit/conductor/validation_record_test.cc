// make_validation_record dates a run from the duration the agent reports: a
// value no run can have must not date it (nor reach an undefined
// double-to-integer conversion, which UBSan reports).
#include <catch2/catch.hpp>

#include <limits>

#include <nlohmann/json.hpp>

#include "controller/conductor/validation_runs.h"

using namespace kiln;

TEST_CASE("validation record: a reported duration dates the start only when a run could have lasted that long") {
  Node node;
  node.id = "n1";
  const int64_t end = 1'800'000'000'000;
  auto started = [&](nlohmann::json duration) {
    nlohmann::json report = {{"checks", nlohmann::json::array()}, {"duration_s", duration}};
    return make_validation_record(node, ValidationPlan::kQuick, "pre_handoff", 1, report, nlohmann::json(), end).started_at;
  };
  CHECK(started(12.5) == end - 12'500);
  CHECK(started(0) == end);
  CHECK(started(kMaxReportedRunSeconds) == end - static_cast<int64_t>(kMaxReportedRunSeconds * 1000));
  CHECK(started(kMaxReportedRunSeconds + 1) == end);
  CHECK(started(-5) == end);
  CHECK(started(1e308) == end);
  CHECK(started(-1e308) == end);
  CHECK(started(std::numeric_limits<double>::max()) == end);
  CHECK(started(std::numeric_limits<int64_t>::max()) == end);
  CHECK(started("100") == end);  // not a number: not believed either
}
