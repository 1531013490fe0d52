#pragma once
// Price per measured unit: what one measured TFLOP-hour, or one GB/s of NCCL
// bus bandwidth held for an hour, costs on a profile's bare-metal or virtual
// nodes, from those nodes' own validation reports; and the measured
// small-message latencies beside it. GET /v1/availability shows these per
// profile and kind (controller/api/availability_routes.cc); docs/validation.md
// gives the formula with a worked example.
//
// Which nodes. The input is the newest passing reports of one profile and
// kind, newest first (ValidationStore::recent_passing_validations). Each node
// counts once, by its newest report in which the figure's check gave a
// verdict: pass (its figure is used), or fail (the node is left out and
// counted as failing: a GPU under its floor is not averaged away by an older
// run). A report where the check is absent or skipped (a quick plan without
// gemm, a VM without GPUDirect) says nothing, and the node's older report is
// read instead.
//
// Which statistic. The median over nodes (the mean of the two middle ones for
// an even count): a node is one machine a tenant may get, and the median is
// what a typical one delivers, moved neither by one slow node nor by one node
// that reports a made-up figure — the reports come from the machines and are
// not trusted. A figure outside its plausible bounds (FigureSpec), not a
// finite number, or inconsistent with the rest of its check (gemm's
// node_tflops above the sum of its per-GPU medians) is refused: that node is
// left out and the refusal counted, never clamped into the median.
//
// Precision and rounding. A figure enters the arithmetic as an integer number
// of thousandths of its unit (milli-TFLOPS, MB/s, nanoseconds). Every
// rounding goes against the tenant, so a shown price never understates the
// cost and a shown figure never flatters the node: a throughput is rounded
// down and a latency up (each node's figure, and the median of an even
// count), and a price is rounded up. Money is the ledger's: integer
// micro-units (usage.h), the profile's price per second read exactly as the
// ledger bills it (price_micros_per_second), and
//
//   price per unit-hour = ceil(price_micros_per_second * 3600 * 1000 / median_milli)
//
// in 128-bit integers: no double touches money.
//
// Pure: no I/O, thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/model/states.h"  // NodeKind
#include "controller/model/validation.h"

namespace kiln {

// The fixed precision of a measured figure: thousandths of its unit.
inline constexpr int64_t kFigureScale = 1000;

// A figure the price or the page reads from one check of a report.
enum class UnitFigure {
  kGemm,                  // gemm: details.node_tflops (TFLOPS, the node's sum of per-GPU BF16 medians)
  kNcclBusbw,             // nccl_allreduce, else nccl_multinode: value (bus bandwidth, GB/s)
  kGpudirectRdmaLatency,  // gpudirect_rdma_latency: value (worst typical µs, 2..64 B); details.p99_us
  kNcclLatency,           // nccl_latency: value (all-reduce time at 8 B, µs)
};

struct FigureSpec {
  UnitFigure id;
  const char* field;  // its key under /v1/availability's measured
  const char* unit;
  const char* source;  // where in the check the figure is read
  bool higher_is_better;
  // Plausible bounds, inclusive, in the unit: a figure outside them is
  // refused. The low bound is one thousandth (the precision: a smaller
  // figure would be 0 and divide a price by nothing); the high one is far
  // above any node today (a million TFLOPS is 1 EFLOPS per node; 100,000
  // GB/s is 50 times NVLink 5's per-GPU bandwidth; 10 s for a small message
  // is a hung fabric, not a latency).
  double min;
  double max;
};

// Every figure, in the order the API shows them.
const std::vector<FigureSpec>& unit_figures();
const FigureSpec& figure_spec(UnitFigure id);

// One node's figure, from one report.
struct NodeFigure {
  std::string node_id;
  std::string report_id;
  int64_t milli = 0;                  // thousandths of the unit, rounded against the tenant
  std::optional<int64_t> p99_milli;   // gpudirect_rdma_latency's details.p99_us, when the report has it
};

// The figure over a profile and kind's nodes.
struct FigureMeasurement {
  UnitFigure id = UnitFigure::kGemm;
  std::string check;                   // the check it came from (nccl_busbw: nccl_allreduce or nccl_multinode)
  std::vector<NodeFigure> nodes;       // one per node, ascending by milli
  int failing_nodes = 0;               // nodes whose newest verdict of the check was fail
  int refused_reports = 0;             // reports whose figure was refused (hostile or corrupt)
  std::string first_refusal;           // why the first one was, for the reason shown
  std::optional<int64_t> median_milli; // set exactly when `nodes` is not empty
  std::optional<int64_t> p99_median_milli;  // gpudirect_rdma_latency, over the nodes that reported a p99
  std::string not_measured;            // why not, when median_milli is empty
};

// The figure of `spec` in one check entry of a report (an element of
// report.checks whose name is the check), in thousandths of its unit, rounded
// against the tenant. kInvalidArgument with the reason when the entry did not
// pass or its figure is missing, not a finite number, out of the spec's
// bounds, or inconsistent with the check's other fields.
Result<int64_t> read_figure_milli(const nlohmann::json& check, const FigureSpec& spec);

// The median of `milli` (any order), rounded against the tenant for an even
// count: down for a throughput, up for a latency. `milli` not empty.
int64_t median_milli(std::vector<int64_t> milli, bool higher_is_better);

// Measures `spec` over `reports` (newest first, as the store returns them) of
// `profile` and `kind`, reading check `check`, per the rules at the top.
FigureMeasurement measure_figure(const std::vector<ValidationRecord>& reports, const FigureSpec& spec,
                                 std::string_view check, std::string_view profile, std::string_view kind);

// ceil(price_micros_per_second * 3600 * kFigureScale / measured_milli): the
// micro-units one unit of the figure costs for an hour. kInvalidArgument when
// the price is negative or measured_milli is not positive; kUnprocessable
// when the result does not fit an int64 (it cannot for a price within
// kMaxPriceMicrosPerSecond and a figure of at least one thousandth, but the
// arithmetic is checked, as the ledger's is).
Result<int64_t> price_micros_per_unit_hour(int64_t price_micros_per_second, int64_t measured_milli);

// Everything /v1/availability shows per profile and kind about measured units.
struct KindUnitPrices {
  // The price as the ledger bills it, or empty when the profile has none for
  // the kind (then every price below is empty, with that reason).
  std::optional<int64_t> price_micros_per_second;
  std::optional<int64_t> price_micros_per_hour;
  std::vector<FigureMeasurement> figures;   // in unit_figures() order
  std::optional<int64_t> price_per_tflop_hour;      // micro-units
  std::optional<int64_t> price_per_nccl_gbps_hour;  // micro-units
  std::string price_per_tflop_hour_not_measured;    // the reason, when empty
  std::string price_per_nccl_gbps_hour_not_measured;

  const FigureMeasurement& figure(UnitFigure id) const;
};

// Computes the above from the profile's document (its price for `kind`, read
// by the ledger's rule) and `reports` (newest first) of that profile and kind.
KindUnitPrices unit_prices(const nlohmann::json& profile_doc, std::string_view profile, NodeKind kind,
                           const std::vector<ValidationRecord>& reports);

}  // namespace kiln
