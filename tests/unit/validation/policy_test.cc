// The gate's policy (controller/model/validation.h) on hand-made reports.
#include <catch2/catch.hpp>

#include "controller/model/validation.h"

using namespace kiln;
using nlohmann::json;

namespace {

json check(const char* name, const char* status, json value = nullptr, json threshold = nullptr,
           json details = json::object()) {
  return {{"name", name}, {"status", status}, {"value", value}, {"unit", "GB/s"},
          {"threshold", threshold}, {"details", details}};
}

json report(std::vector<json> checks) {
  bool fail = false;
  for (const json& c : checks) fail |= c["status"] == "fail";
  return {{"plan", "full"}, {"result", fail ? "fail" : "pass"}, {"checks", checks}};
}

}  // namespace

TEST_CASE("a passing report passes") {
  GateDecision d = judge_report(report({check("nccl_allreduce", "pass", 450, {{"min", 400}})}), json(), ValidationPlan::kFull, 1);
  CHECK(d.verdict == GateVerdict::kPass);
  CHECK(d.failing.empty());
}

TEST_CASE("a numeric miss is retried once, then quarantines") {
  json r = report({check("nccl_allreduce", "fail", 380.5, {{"min", 400}}), check("hbm_bandwidth", "pass", 3000)});
  GateDecision first = judge_report(r, json(), ValidationPlan::kFull, 1);
  CHECK(first.verdict == GateVerdict::kRetry);
  CHECK(first.numeric_only);
  REQUIRE(first.failing.size() == 1);
  CHECK_THAT(first.failing[0], Catch::Contains("nccl_allreduce") && Catch::Contains("below the floor 400"));
  GateDecision second = judge_report(r, json(), ValidationPlan::kFull, 2);
  CHECK(second.verdict == GateVerdict::kQuarantine);
  CHECK_THAT(second.reason, Catch::Contains("validation (full, attempt 2) failed: nccl_allreduce") &&
                                Catch::Contains("numeric miss on the retry"));
  // A maximum (jitter p99.9) is a numeric miss too.
  CHECK(is_numeric_miss(check("jitter", "fail", 120, {{"max", 50}})));
}

TEST_CASE("non-numeric failures quarantine at once") {
  SECTION("missing GPU") {
    json r = report({check("gpu_inventory", "fail", 7, {{"expected", 8}}, {{"reason", "expected 8 GPUs, found 7"}})});
    GateDecision d = judge_report(r, json(), ValidationPlan::kFull, 1);
    CHECK(d.verdict == GateVerdict::kQuarantine);
    CHECK_THAT(d.reason, Catch::Contains("gpu_inventory: expected 8 GPUs, found 7") &&
                             Catch::Contains("not a numeric miss"));
  }
  SECTION("XID") {
    json r = report({check("gpu_health", "fail", 1, {{"max", 0}}, {{"reason", "GPU 3: XID 79"}})});
    CHECK(judge_report(r, json(), ValidationPlan::kQuick, 1).verdict == GateVerdict::kQuarantine);
  }
  SECTION("inactive RDMA port") {
    json r = report({check("gpudirect_rdma", "fail", 7, {{"min", 8}}, {{"reason", "mlx5_3 port 1 DOWN"}})});
    CHECK(judge_report(r, json(), ValidationPlan::kQuick, 1).verdict == GateVerdict::kQuarantine);
  }
  SECTION("a throughput check that measured nothing") {
    json r = report({check("hbm_bandwidth", "fail", nullptr, {{"min", 2848}}, {{"reason", "not measured"}})});
    CHECK_FALSE(is_numeric_miss(r["checks"][0]));
    CHECK(judge_report(r, json(), ValidationPlan::kFull, 1).verdict == GateVerdict::kQuarantine);
  }
  SECTION("a throughput check whose number is fine failed for another reason") {
    json r = report({check("nvme_read", "fail", 5.0, {{"min", 3.0}}, {{"reason", "expected 2 NVMe, found 1"}})});
    CHECK(judge_report(r, json(), ValidationPlan::kFull, 1).verdict == GateVerdict::kQuarantine);
  }
  SECTION("a numeric miss together with a hard failure is not retried") {
    json r = report({check("nccl_allreduce", "fail", 300, {{"min", 400}}), check("nvlink", "fail", 17, {{"min", 18}})});
    CHECK(judge_report(r, json(), ValidationPlan::kFull, 1).verdict == GateVerdict::kQuarantine);
  }
  SECTION("not a report") {
    CHECK(judge_report(json{{"result", "pass"}}, json(), ValidationPlan::kFull, 1).verdict == GateVerdict::kQuarantine);
    CHECK(judge_report(json("x"), json(), ValidationPlan::kFull, 1).verdict == GateVerdict::kQuarantine);
  }
}

TEST_CASE("only the checks of the profile's plan gate") {
  json profile = {{"plans", {{"quick", {"gpu_inventory", "jitter", "nvme_read"}}, {"full", {"jitter"}}}}};
  json r = report({check("jitter", "pass", 10, {{"max", 20000}}), check("dcgm_diag", "fail")});
  CHECK(judge_report(r, profile, ValidationPlan::kQuick, 1).verdict == GateVerdict::kPass);
  json bad = report({check("jitter", "fail", 30000, {{"max", 20000}}), check("dcgm_diag", "fail")});
  GateDecision d = judge_report(bad, profile, ValidationPlan::kFull, 1);
  CHECK(d.verdict == GateVerdict::kRetry);
  CHECK(d.failing.size() == 1);
  // Without plans every check gates.
  CHECK(judge_report(r, json::object(), ValidationPlan::kQuick, 1).verdict == GateVerdict::kQuarantine);
}

TEST_CASE("headline values come from passing checks only") {
  json r = report({check("nccl_allreduce", "pass", 452.5), check("hbm_bandwidth", "fail", 10, {{"min", 20}}),
                   check("jitter", "skip")});
  CHECK(headline_value(r, "nccl_allreduce") == 452.5);
  CHECK(headline_value(r, "hbm_bandwidth").is_null());
  CHECK(headline_value(r, "jitter").is_null());
  CHECK(headline_value(r, "nvme_read").is_null());
}

TEST_CASE("nccl_multinode: kilnd's check appended to a report, a low busbw retries, a round that could not run does not") {
  json r = report({check("jitter", "pass", 10)});
  r["summary"] = {{"pass", 1}, {"fail", 0}, {"skip", 0}};
  add_check_to_report(r, check("nccl_multinode", "skip", nullptr, nullptr, {{"reason", "not in an allocation"}}));
  CHECK(r["result"] == "pass");
  CHECK(r["summary"]["skip"] == 1);
  CHECK(r["checks"].size() == 2);

  json low = r;
  add_check_to_report(low, check("nccl_multinode", "fail", 250.0, {{"min", 300}}));
  CHECK(low["result"] == "fail");
  CHECK(low["summary"]["fail"] == 1);
  CHECK(judge_report(low, json(), ValidationPlan::kQuick, 1).verdict == GateVerdict::kRetry);

  json broken = r;
  add_check_to_report(broken, check("nccl_multinode", "fail", nullptr, {{"min", 300}},
                                    {{"reason", "rank 0 (node x) could not start the collective: no CUDA device"}}));
  GateDecision d = judge_report(broken, json(), ValidationPlan::kQuick, 1);
  CHECK(d.verdict == GateVerdict::kQuarantine);
  CHECK_THAT(d.reason, Catch::Contains("nccl_multinode: rank 0 (node x) could not start the collective"));
}
