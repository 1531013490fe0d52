// Price per measured unit through the real kilnd: fake-driver nodes whose
// scripted reports carry gemm, NCCL and latency checks are burned in (the
// conductor's gate stores each report), then /v1/availability shows the
// median node TFLOPS, the integer micro-unit prices and the virtualization
// tax; a failing gemm and hostile figures are left out; a tenant sees the
// per-node values but not the ids of reports it may not read; staff follow the
// ids and reproduce each figure from the stored reports by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "kiln_unit_price_admin_token_0001";

json call(HttpTestClient& c, const std::string& method, const std::string& target, const json& body, int expect,
          const std::string& token = kToken) {
  auto r = c.request(method, target, body.is_null() ? "" : body.dump(),
                     {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}});
  INFO(method << " " << target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status == expect);
  return r.body.empty() ? json() : json::parse(r.body);
}

json get(HttpTestClient& c, const std::string& target, const std::string& token = kToken) {
  return call(c, "GET", target, json(), 200, token);
}

json gemm(double node_tflops, const std::string& status = "pass") {
  return {{"name", "gemm"}, {"status", status}, {"value", node_tflops / 8}, {"unit", "TFLOPS"},
          {"threshold", nullptr}, {"details", {{"dtype", "bf16"}, {"seconds", 20}, {"node_tflops", node_tflops}}}};
}

json valued(const std::string& name, double v, const char* unit) {
  return {{"name", name}, {"status", "pass"}, {"value", v}, {"unit", unit}, {"threshold", nullptr}};
}

// Enrolls a fake node of gpu8 whose every validation returns `checks`, and
// brings it to available with a stored report (burn-in runs the full plan on
// bare metal; a virtual node is asked for one).
// (A vector: a braced list of one json would be that json, not an array.)
void provide(HttpTestClient& c, const std::string& name, const std::string& kind, const std::vector<json>& checks) {
  json report = {{"checks", json(checks)}};
  call(c, "POST", "/v1/nodes",
       {{"name", name}, {"profile", "gpu8"}, {"kind", kind},
        {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}, {"options", {{"validation_script", json::array({report})}}}}}},
       201);
  call(c, "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "manage"}}, 202);
  REQUIRE(wait_until([&] { return get(c, "/v1/nodes/" + name)["provision_state"] == "manageable"; }, 20s));
  call(c, "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "provide"}}, 202);
  json n;
  // A virtual node is not burned in: its report is an on-demand run.
  if (kind == "virtual") {
    REQUIRE(wait_until([&] { return get(c, "/v1/nodes/" + name)["provision_state"] == "available"; }, 20s));
    call(c, "POST", "/v1/nodes/" + name + "/validations", {{"plan", "full"}}, 202);
  }
  const bool ok = wait_until([&] {
    n = get(c, "/v1/nodes/" + name);
    return n["provision_state"] == "available" && !n["last_validation"].is_null();
  }, 20s);
  if (!ok) FAIL(name << " never became available with a report: " << n.dump());
}

// The doc's formula, written again here from docs/validation.md: the figure in
// thousandths rounded down, the median of an even count rounded down, and
// ceil(price_micros_per_second * 3600 * 1000 / median).
int64_t by_hand(int64_t price_micros_per_second, std::vector<double> figures) {
  std::vector<int64_t> milli;
  for (double f : figures) milli.push_back(static_cast<int64_t>(f * 1000 + 1e-7));  // the decimals are exact here
  std::sort(milli.begin(), milli.end());
  const std::size_t n = milli.size();
  const int64_t median = n % 2 ? milli[n / 2] : (milli[n / 2 - 1] + milli[n / 2]) / 2;
  const int64_t per_hour = price_micros_per_second * 3600 * 1000;
  return per_hour / median + (per_hour % median != 0 ? 1 : 0);
}

}  // namespace

TEST_CASE("availability: price per measured TFLOP and GB/s from reports kilnd stored, reproducible from them") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  // gemm is not in the plans: a node whose gemm fails still passes the gate,
  // and its figure must still be left out of the price.
  call(c, "POST", "/v1/profiles",
       {{"name", "gpu8"},
        {"gpu", {{"count", 8}, {"model", "H100"}}},
        {"plans", {{"quick", {"nccl_allreduce"}}, {"full", {"nccl_allreduce"}}}},
        {"price", {{"baremetal_per_second", 0.004}, {"virtual_per_second", 0.0035}}}},
       201);
  json rdma = valued("gpudirect_rdma_latency", 1.61, "us");
  rdma["details"] = {{"tool", "ib_write_lat"}, {"p99_us", 2.05}};
  provide(c, "b0", "baremetal",
          {gemm(5123.4567), valued("nccl_allreduce", 452.15, "GB/s"), rdma, valued("nccl_latency", 18.2, "us")});
  provide(c, "b1", "baremetal", {gemm(5201.0), valued("nccl_allreduce", 448.0, "GB/s")});
  provide(c, "b2", "baremetal", {gemm(4987.9)});
  provide(c, "b3", "baremetal", {gemm(100, "fail"), valued("nccl_allreduce", 451.0, "GB/s")});  // failing gemm
  provide(c, "b4", "baremetal", {gemm(-5)});                                                       // hostile
  provide(c, "b5", "baremetal", {gemm(1e12)});                                                     // hostile
  provide(c, "v0", "virtual", {gemm(4700.25), valued("nccl_latency", 25.0, "us")});

  call(c, "POST", "/v1/tenants", {{"name", "acme"}, {"quotas", json::array()}}, 201);
  const std::string tenant =
      call(c, "POST", "/v1/tokens", {{"name", "acme-t"}, {"role", "tenant"}, {"tenant", "acme"}}, 201)["token"];

  json as_tenant = get(c, "/v1/availability?profile=gpu8", tenant)["availability"][0];
  INFO(as_tenant.dump(2));
  const json& bm = as_tenant["kinds"]["baremetal"];
  const json& vm = as_tenant["kinds"]["virtual"];
  // The existing fields are as they were.
  CHECK(bm["price_per_second"] == 0.004);
  CHECK(bm["measured"]["nccl_allreduce"]["unit"] == "GB/s");

  // gemm: b0, b1, b2; b3 failed it, b4 and b5 were refused.
  const json& g = bm["measured"]["gemm"];
  CHECK(g["median"] == 5123.456);
  CHECK(g["unit"] == "TFLOPS");
  CHECK(g["source"] == "details.node_tflops");
  CHECK(g["nodes"] == 3);
  CHECK(g["values"] == json::array({4987.9, 5123.456, 5201.0}));
  CHECK(g["failing_nodes"] == 1);
  CHECK(g["refused_reports"] == 2);
  // The pool's reports are not the tenant's to read: no ids, only the count.
  CHECK(g["reports"].empty());
  CHECK(g["reports_withheld"] == 3);
  CHECK(bm["price_micros_per_hour"] == 14'400'000);
  CHECK(bm["price_per_tflop_hour"] == 2811);
  CHECK(bm["price_per_tflop_hour"] == by_hand(4000, {5123.456, 5201.0, 4987.9}));
  // NCCL: b0, b1, b3 (its nccl passed): median 451.0 GB/s.
  CHECK(bm["measured"]["nccl_busbw"]["check"] == "nccl_allreduce");
  CHECK(bm["measured"]["nccl_busbw"]["median"] == 451.0);
  CHECK(bm["price_per_nccl_gbps_hour"] == by_hand(4000, {452.15, 448.0, 451.0}));
  CHECK(bm["measured"]["gpudirect_rdma_latency"]["median"] == 1.61);
  CHECK(bm["measured"]["gpudirect_rdma_latency"]["p99_median"] == 2.05);
  CHECK(bm["measured"]["nccl_latency"]["median"] == 18.2);
  CHECK(bm["not_measured"].empty());

  CHECK(vm["measured"]["gemm"]["median"] == 4700.25);
  CHECK(vm["price_per_tflop_hour"] == by_hand(3500, {4700.25}));
  CHECK(vm["price_per_nccl_gbps_hour"].is_null());
  CHECK(vm["measured"]["nccl_busbw"].is_null());
  CHECK(vm["measured"]["gpudirect_rdma_latency"].is_null());
  CHECK_THAT(vm["not_measured"]["price_per_nccl_gbps_hour"].get<std::string>(), Catch::Contains("not measured"));
  CHECK_THAT(vm["not_measured"]["gpudirect_rdma_latency"].get<std::string>(),
             Catch::Contains("no passing report of a virtual node of gpu8"));

  const json& tax = as_tenant["virtualization_tax"];
  CHECK(tax["gemm"]["relative"].get<double>() == Approx((5123.456 - 4700.25) / 5123.456));
  CHECK(tax["nccl_latency"]["relative"].get<double>() == Approx((25.0 - 18.2) / 18.2));
  CHECK(tax["price_per_tflop_hour"]["baremetal"] == 2811.0);
  CHECK_FALSE(tax.contains("nccl_busbw"));  // not measured on the VM
  CHECK_FALSE(tax.contains("gpudirect_rdma_latency"));

  // Staff see the report ids, and every figure comes back from the stored
  // reports by hand.
  json as_staff = get(c, "/v1/availability?profile=gpu8")["availability"][0]["kinds"]["baremetal"];
  const json& sg = as_staff["measured"]["gemm"];
  REQUIRE(sg["reports"].size() == 3);
  CHECK(sg["reports_withheld"] == 0);
  std::vector<double> from_reports;
  for (const json& id : sg["reports"]) {
    json v = get(c, "/v1/validations/" + id.get<std::string>());
    CHECK(v["result"] == "pass");
    for (const json& check : v["report"]["checks"])
      if (check["name"] == "gemm") from_reports.push_back(check["details"]["node_tflops"].get<double>());
  }
  REQUIRE(from_reports.size() == 3);
  CHECK(as_staff["price_per_tflop_hour"] == by_hand(4000, from_reports));
  // And the tenant cannot read them: the ids it was not shown are 404 to it.
  CHECK(c.request("GET", "/v1/validations/" + sg["reports"][0].get<std::string>(), "",
                  {{"Authorization", "Bearer " + tenant}})
            .status == 404);
}
