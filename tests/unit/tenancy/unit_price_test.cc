// Price per measured unit (unit_price.h): figures read from untrusted reports
// at a fixed precision, the median per node, and integer money rounded up.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "controller/tenancy/unit_price.h"
#include "controller/tenancy/usage.h"

using namespace kiln;
using json = nlohmann::json;

namespace {

json gemm(double node_tflops, const std::string& status = "pass") {
  return {{"name", "gemm"},
          {"status", status},
          {"value", node_tflops / 8},
          {"unit", "TFLOPS"},
          {"details", {{"dtype", "bf16"}, {"node_tflops", node_tflops}}}};
}

json valued(const std::string& name, double value, const std::string& status = "pass") {
  return {{"name", name}, {"status", status}, {"value", value}};
}

int next_id = 0;

// A vector, not a json: a braced list of one json would copy that element
// instead of making an array of it.
ValidationRecord rec(const std::string& node, const std::vector<json>& checks, const std::string& kind = "baremetal") {
  ValidationRecord v;
  v.id = "r" + std::to_string(++next_id);
  v.node_id = node;
  v.profile = "gpu8";
  v.node_kind = kind;
  v.plan = "full";
  v.result = "pass";
  v.report = {{"result", "pass"}, {"checks", json(checks)}};
  return v;
}

const FigureSpec& gemm_spec() { return figure_spec(UnitFigure::kGemm); }

json price(double bm, double vm) { return {{"price", {{"baremetal_per_second", bm}, {"virtual_per_second", vm}}}}; }

}  // namespace

TEST_CASE("unit price: ceil(price per hour * 1000 / milli-figure), exact integers, never understated",
          "[unit_price]") {
  // The worked example of docs/validation.md: 0.004 a second is 4000 micros,
  // 14,400,000 an hour; 5123.456 TFLOPS: 2810.60... rounds up to 2811.
  CHECK(*price_micros_per_unit_hour(4000, 5'123'456) == 2811);
  // Exact division: no rounding.
  CHECK(*price_micros_per_unit_hour(1000, 3'600'000) == 1000);
  // One micro over an exact multiple rounds up by one, not to nearest.
  CHECK(*price_micros_per_unit_hour(1000, 3'600'001) == 1000);
  CHECK(*price_micros_per_unit_hour(1000, 3'599'999) == 1001);
  // A free profile costs nothing per unit.
  CHECK(*price_micros_per_unit_hour(0, 1) == 0);
  // The dearest price over the smallest figure fits (3.6e15), and the
  // cheapest over the largest is still at least one micro.
  CHECK(*price_micros_per_unit_hour(kMaxPriceMicrosPerSecond, 1) == 3'600'000'000'000'000);
  CHECK(*price_micros_per_unit_hour(1, 1'000'000'000) == 1);
  // Far past the bounds the 128-bit arithmetic is refused, never wrapped.
  CHECK(price_micros_per_unit_hour(std::numeric_limits<int64_t>::max(), 1).error().code == Code::kUnprocessable);
  CHECK(price_micros_per_unit_hour(100, 0).error().code == Code::kInvalidArgument);
  CHECK(price_micros_per_unit_hour(100, -5).error().code == Code::kInvalidArgument);
  CHECK(price_micros_per_unit_hour(-1, 5).error().code == Code::kInvalidArgument);
}

TEST_CASE("unit price: the median rounds an even count against the tenant", "[unit_price]") {
  CHECK(median_milli({5, 1, 3}, true) == 3);
  CHECK(median_milli({4, 1}, true) == 2);   // 2.5 TFLOPS-milli down: a throughput never flatters
  CHECK(median_milli({4, 1}, false) == 3);  // 2.5 up: nor does a latency
  CHECK(median_milli({7}, true) == 7);
  CHECK(median_milli({10'000'000'000, 9'999'999'999}, true) == 9'999'999'999);  // the high bounds do not wrap
}

TEST_CASE("unit price: a figure at a fixed precision, refused when hostile", "[unit_price]") {
  const FigureSpec& g = gemm_spec();
  CHECK(*read_figure_milli(gemm(5123.4567), g) == 5'123'456);  // down: a throughput
  CHECK(*read_figure_milli(gemm(0.29), g) == 290);             // the double 0.28999.. is read as 0.290
  CHECK(*read_figure_milli(gemm(1e6), g) == 1'000'000'000);
  CHECK(*read_figure_milli(gemm(0.001), g) == 1);
  const FigureSpec& lat = figure_spec(UnitFigure::kNcclLatency);
  CHECK(*read_figure_milli(valued("nccl_latency", 11.0001), lat) == 11'001);  // up: a latency
  CHECK(*read_figure_milli(valued("nccl_latency", 11.0), lat) == 11'000);

  auto refused = [&](const json& check, const FigureSpec& spec, const std::string& why) {
    Result<int64_t> r = read_figure_milli(check, spec);
    INFO(check.dump());
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Code::kInvalidArgument);
    CHECK_THAT(r.error().message, Catch::Contains(why));
  };
  refused(gemm(-3), g, "outside");
  refused(gemm(0), g, "outside");
  refused(gemm(0.0004), g, "outside");  // would be 0 at the precision and divide a price by nothing
  refused(gemm(1e7), g, "outside");
  refused(gemm(1e308), g, "outside");
  refused(gemm(std::nan("")), g, "not finite");
  refused(gemm(std::numeric_limits<double>::infinity()), g, "not finite");
  refused(gemm(500, "fail"), g, "did not pass");
  json s = gemm(500);
  s["details"]["node_tflops"] = "500";
  refused(s, g, "not a number");
  s["details"]["node_tflops"] = true;
  refused(s, g, "not a number");
  s["details"] = "fast";
  refused(s, g, "no details");
  s["details"] = {{"dtype", "bf16"}};
  refused(s, g, "node_tflops");
  refused(json::array(), g, "not an object");
  // A node figure above the GPUs it lists is made up.
  json lying = gemm(8000);
  lying["details"]["per_gpu"] = {{{"index", 0}, {"tflops_median", 700.0}}, {{"index", 1}, {"tflops_median", 700.0}}};
  refused(lying, g, "above the sum of its per-GPU medians");
  json honest = gemm(1400);
  honest["details"]["per_gpu"] = lying["details"]["per_gpu"];
  CHECK(*read_figure_milli(honest, g) == 1'400'000);
  json bad_gpu = honest;
  bad_gpu["details"]["per_gpu"][1]["tflops_median"] = -1;
  refused(bad_gpu, g, "per_gpu");
  refused(valued("nccl_latency", -1), lat, "outside");
  refused(valued("nccl_latency", 2e7), lat, "outside");
  refused({{"name", "nccl_latency"}, {"status", "pass"}}, lat, "not a number");
}

TEST_CASE("unit price: one figure per node, its newest verdict, median over nodes", "[unit_price]") {
  const FigureSpec& g = gemm_spec();
  // Newest first, as the store returns them.
  std::vector<ValidationRecord> reports = {
      rec("n1", {gemm(5123.4567)}),
      rec("n2", {valued("nccl_allreduce", 450)}),  // quick plan: no gemm, so n2's older report counts
      rec("n3", {gemm(100, "fail")}),              // n3's newest gemm failed: left out, not averaged
      rec("n1", {gemm(9999)}),                     // older than n1's newest: ignored
      rec("n2", {gemm(5201.0)}),
      rec("n3", {gemm(6000)}),                     // older pass of a node whose newest failed: ignored
      rec("n4", {gemm(4987.9)}),
      rec("n5", {gemm(std::nan(""))}),             // hostile: refused and counted
      rec("n6", {gemm(4000, "skip")}),             // skipped: says nothing
  };
  FigureMeasurement m = measure_figure(reports, g, "gemm", "gpu8", "baremetal");
  REQUIRE(m.median_milli);
  CHECK(*m.median_milli == 5'123'456);
  REQUIRE(m.nodes.size() == 3);
  CHECK(m.nodes[0].node_id == "n4");  // ascending
  CHECK(m.nodes[1].report_id == reports[0].id);
  CHECK(m.nodes[2].report_id == reports[4].id);
  CHECK(m.failing_nodes == 1);
  CHECK(m.refused_reports == 1);
  CHECK_THAT(m.first_refusal, Catch::Contains(reports[7].id) && Catch::Contains("not finite"));
  CHECK(m.not_measured.empty());

  SECTION("nothing measured: a reason, never an estimate") {
    FigureMeasurement none = measure_figure({rec("n1", {valued("nccl_allreduce", 450)})}, g, "gemm", "gpu8", "virtual");
    CHECK_FALSE(none.median_milli);
    CHECK(none.not_measured == "no passing report of a virtual node of gpu8 in the window ran gemm");
    FigureMeasurement bad =
        measure_figure({rec("n1", {gemm(-1)}), rec("n2", {gemm(1, "fail")})}, g, "gemm", "gpu8", "baremetal");
    CHECK_FALSE(bad.median_milli);
    CHECK_THAT(bad.not_measured, Catch::Contains("1 node failed it, 1 report refused") && Catch::Contains("outside"));
  }
  SECTION("hostile nodes in the minority do not move the median") {
    std::vector<ValidationRecord> r = {rec("a", {gemm(1000)}), rec("b", {gemm(1001)}), rec("c", {gemm(999)}),
                                       rec("d", {gemm(1e6)}), rec("e", {gemm(0.001)})};
    CHECK(*measure_figure(r, g, "gemm", "gpu8", "baremetal").median_milli == 1'000'000);
  }
}

TEST_CASE("unit price: bare metal and virtual of one profile, priced by the ledger's price", "[unit_price]") {
  json doc = price(0.004, 0.0035);
  json p99 = valued("gpudirect_rdma_latency", 1.61);
  p99["details"] = {{"p99_us", 2.05}};
  std::vector<ValidationRecord> bm = {
      rec("b1", {gemm(5123.4567), valued("nccl_allreduce", 452.15), p99, valued("nccl_latency", 18.2)}),
      rec("b2", {gemm(5201.0), valued("nccl_allreduce", 448.0), valued("gpudirect_rdma_latency", 1.7),
                 valued("nccl_latency", 19.01)}),
      rec("b3", {gemm(4987.9)}),
  };
  KindUnitPrices b = unit_prices(doc, "gpu8", NodeKind::kBaremetal, bm);
  REQUIRE(b.price_micros_per_second == 4000);
  CHECK(b.price_micros_per_hour == 14'400'000);
  CHECK(b.price_per_tflop_hour == 2811);
  // busbw: (452150 + 448000) / 2 = 450075 MB/s; 14.4e9 / 450075 = 31994.67 -> 31995.
  CHECK(b.figure(UnitFigure::kNcclBusbw).check == "nccl_allreduce");
  CHECK(b.figure(UnitFigure::kNcclBusbw).median_milli == 450'075);
  CHECK(b.price_per_nccl_gbps_hour == 31'995);
  // Latencies: the even count's median rounded up, in nanoseconds.
  CHECK(b.figure(UnitFigure::kGpudirectRdmaLatency).median_milli == 1'655);
  CHECK(b.figure(UnitFigure::kGpudirectRdmaLatency).p99_median_milli == 2'050);  // only b1 has a p99
  CHECK(b.figure(UnitFigure::kNcclLatency).median_milli == 18'605);

  // Virtual: gemm on one node, no NCCL at all, so no price per GB/s.
  std::vector<ValidationRecord> vm = {rec("v1", {gemm(4700.25)}, "virtual")};
  KindUnitPrices v = unit_prices(doc, "gpu8", NodeKind::kVirtual, vm);
  CHECK(v.price_micros_per_second == 3500);
  CHECK(v.price_per_tflop_hour == 2681);  // 12.6e9 / 4700250 = 2680.71 -> 2681
  CHECK_FALSE(v.price_per_nccl_gbps_hour);
  CHECK_THAT(v.price_per_nccl_gbps_hour_not_measured,
             Catch::Contains("nccl_busbw not measured") && Catch::Contains("nccl_multinode"));
  CHECK_FALSE(v.figure(UnitFigure::kGpudirectRdmaLatency).median_milli);

  SECTION("a profile without a price has measured figures and no price per unit") {
    KindUnitPrices n = unit_prices(json::object(), "gpu8", NodeKind::kBaremetal, bm);
    CHECK_FALSE(n.price_micros_per_second);
    CHECK_FALSE(n.price_per_tflop_hour);
    CHECK(n.price_per_tflop_hour_not_measured == "profile gpu8 has no baremetal price");
    CHECK(n.figure(UnitFigure::kGemm).median_milli == 5'123'456);
  }
  SECTION("no reports: every figure and price null with its reason") {
    KindUnitPrices e = unit_prices(doc, "gpu8", NodeKind::kBaremetal, {});
    for (const FigureMeasurement& f : e.figures) {
      CHECK_FALSE(f.median_milli);
      CHECK_FALSE(f.not_measured.empty());
    }
    CHECK_FALSE(e.price_per_tflop_hour);
    CHECK_THAT(e.price_per_tflop_hour_not_measured, Catch::StartsWith("gemm not measured: no passing report"));
  }
  SECTION("only the multi-node round measured bus bandwidth: priced by it, named") {
    KindUnitPrices m = unit_prices(doc, "gpu8", NodeKind::kBaremetal, {rec("b1", {valued("nccl_multinode", 360)})});
    CHECK(m.figure(UnitFigure::kNcclBusbw).check == "nccl_multinode");
    CHECK(m.price_per_nccl_gbps_hour == 40'000);  // 14.4e9 / 360000
  }
  SECTION("the dearest price the ledger takes over the smallest figure fits") {
    KindUnitPrices d = unit_prices(price(kMaxPricePerSecond, 1e300), "gpu8", NodeKind::kVirtual,
                                   {rec("v1", {gemm(0.001)}, "virtual")});
    CHECK(d.price_micros_per_second == kMaxPriceMicrosPerSecond);  // a stored price above the bound reads as it
    CHECK(d.price_per_tflop_hour == 3'600'000'000'000'000);
  }
}
