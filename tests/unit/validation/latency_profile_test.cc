// The latency checks on kilnd's side: the profile fields it accepts and
// refuses, the shipped profiles that gate on them, and a ceiling missed by a
// measurement being a numeric miss (retried once), not a hard failure.
#include <catch2/catch.hpp>

#include "controller/api/profile_input.h"
#include "controller/model/validation.h"

using nlohmann::json;

TEST_CASE("profiles: latency ceilings, the gds floor and gds.path are accepted and bad ones refused by field") {
  json doc = {{"name", "lat"},
              {"thresholds", {{"gpudirect_rdma_latency_us_max", 2.5}, {"nccl_latency_us_max", 40}, {"gds_read_gbps_min", 10}}},
              {"gds", {{"path", "/mnt/nvme/gds.bin"}}},
              {"plans", {{"full", {"gpudirect_rdma_latency", "nccl_latency", "gds_read"}}}}};
  CHECK(kiln::api::check_profile_doc(doc));
  json bad = doc;
  bad["thresholds"]["nccl_latency_us_max"] = "fast";
  bad["gds"]["bogus"] = 1;
  auto s = kiln::api::check_profile_doc(bad);
  REQUIRE_FALSE(s);
  std::vector<std::string> fields;
  for (const auto& f : s.error().fields) fields.push_back(f.field);
  CHECK(std::find(fields.begin(), fields.end(), "/thresholds/nccl_latency_us_max") != fields.end());
  CHECK(std::find(fields.begin(), fields.end(), "/gds/bogus") != fields.end());
}

TEST_CASE("profiles: the shipped bare-metal 8-GPU profiles gate the full plan on the latency checks") {
  std::vector<std::string> errors;
  const auto profiles = kiln::api::default_profiles(&errors);
  CHECK(errors.empty());
  int seen = 0;
  for (const auto& p : profiles) {
    if (p.name != "h100-sxm-8x" && p.name != "h200-sxm-8x" && p.name != "h100-pcie-8x") continue;
    ++seen;
    INFO(p.name);
    CHECK(p.doc["thresholds"]["gpudirect_rdma_latency_us_max"] == 3.0);
    CHECK(p.doc["thresholds"]["nccl_latency_us_max"] == 50);
    const json& full = p.doc["plans"]["full"];
    for (const char* c : {"gpudirect_rdma_latency", "nccl_latency", "gds_read"})
      CHECK(std::find(full.begin(), full.end(), json(c)) != full.end());
  }
  CHECK(seen == 3);
}

TEST_CASE("a latency over its ceiling is a numeric miss but a run that measured nothing is not") {
  const json over = {{"name", "nccl_latency"}, {"status", "fail"}, {"value", 61.2}, {"unit", "us"},
                     {"threshold", {{"max", 50}}}, {"details", json::object()}};
  CHECK(kiln::is_numeric_miss(over));
  json none = over;
  none["value"] = nullptr;
  CHECK_FALSE(kiln::is_numeric_miss(none));
  json rdma = over;
  rdma["name"] = "gpudirect_rdma_latency";
  rdma["value"] = 4.1;
  rdma["threshold"] = {{"max", 3.0}};
  CHECK(kiln::is_numeric_miss(rdma));
  json gds = {{"name", "gds_read"}, {"status", "fail"}, {"value", 1.2}, {"threshold", {{"min", 10}}}};
  CHECK(kiln::is_numeric_miss(gds));
}
