#include "controller/tenancy/unit_price.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>

#include "controller/tenancy/usage.h"

namespace kiln {

using json = nlohmann::json;

namespace {

// A gemm report lists one entry per GPU; more than this is not a node.
constexpr std::size_t kMaxGpusPerNode = 1024;
// node_tflops is the sum of the per-GPU medians; a report claiming more than
// that sum, beyond the last digits of a printed double, is inconsistent.
constexpr double kSumTolerance = 1e-6;

std::string fmt(double v) { return json(v).dump(); }

// A finite number within the spec's bounds, or the reason it is not.
Result<double> bounded(const json& v, const FigureSpec& spec, const std::string& what) {
  if (!v.is_number()) return Error::invalid(what, what + " is not a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) return Error::invalid(what, what + " is not finite");
  if (d < spec.min || d > spec.max)
    return Error::invalid(what, what + " " + fmt(d) + " is outside " + fmt(spec.min) + ".." + fmt(spec.max) + " " +
                                    spec.unit);
  return d;
}

// Thousandths, rounded against the tenant: down for a throughput, up for a
// latency. A report's 0.29 is the double 0.28999999999999998, times 1000
// 289.99999999999994: a figure that is a whole number of thousandths but for
// the double's own representation error (far below a thousandth: relative
// 1e-14) is read as that number, so a tenant who multiplies the printed
// figure by 1000 by hand gets the same integer. d is within the spec's
// bounds, so |d * 1000| <= 1e10 and every integer it lands on is exact.
int64_t to_milli(double d, bool higher_is_better) {
  const double scaled = d * static_cast<double>(kFigureScale);
  const double nearest = std::nearbyint(scaled);
  if (std::fabs(scaled - nearest) <= std::max(1e-9, std::fabs(scaled) * 1e-14)) return static_cast<int64_t>(nearest);
  return static_cast<int64_t>(higher_is_better ? std::floor(scaled) : std::ceil(scaled));
}

// gemm: details.node_tflops, not above the sum of the per-GPU medians the
// same report lists (when it lists them).
Result<double> gemm_node_tflops(const json& check, const FigureSpec& spec) {
  auto details = check.find("details");
  if (details == check.end() || !details->is_object()) return Error::invalid("details", "gemm has no details");
  auto node = details->find("node_tflops");
  if (node == details->end()) return Error::invalid("details.node_tflops", "gemm has no details.node_tflops");
  Result<double> tflops = bounded(*node, spec, "details.node_tflops");
  if (!tflops) return tflops;
  auto per_gpu = details->find("per_gpu");
  if (per_gpu == details->end() || !per_gpu->is_array() || per_gpu->empty()) return tflops;
  if (per_gpu->size() > kMaxGpusPerNode)
    return Error::invalid("details.per_gpu", "details.per_gpu lists more than " + std::to_string(kMaxGpusPerNode) +
                                                 " GPUs");
  double sum = 0;
  for (const json& g : *per_gpu) {
    const json median = g.is_object() ? g.value("tflops_median", json()) : json();
    Result<double> m = bounded(median, spec, "details.per_gpu[].tflops_median");
    if (!m) return m;
    sum += *m;
  }
  if (*tflops > sum * (1 + kSumTolerance))
    return Error::invalid("details.node_tflops", "details.node_tflops " + fmt(*tflops) +
                                                     " is above the sum of its per-GPU medians " + fmt(sum));
  return tflops;
}

std::string plural(int n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); }

}  // namespace

const std::vector<FigureSpec>& unit_figures() {
  static const std::vector<FigureSpec> specs = {
      {UnitFigure::kGemm, "gemm", "TFLOPS", "details.node_tflops", true, 0.001, 1e6},
      {UnitFigure::kNcclBusbw, "nccl_busbw", "GB/s", "value", true, 0.001, 1e5},
      {UnitFigure::kGpudirectRdmaLatency, "gpudirect_rdma_latency", "us", "value", false, 0.001, 1e7},
      {UnitFigure::kNcclLatency, "nccl_latency", "us", "value", false, 0.001, 1e7},
  };
  return specs;
}

const FigureSpec& figure_spec(UnitFigure id) {
  for (const FigureSpec& s : unit_figures())
    if (s.id == id) return s;
  assert(false && "every UnitFigure has a spec");
  return unit_figures().front();
}

Result<int64_t> read_figure_milli(const json& check, const FigureSpec& spec) {
  if (!check.is_object()) return Error::invalid("check", "the check is not an object");
  if (check.value("status", "") != "pass") return Error::invalid("status", "the check did not pass");
  Result<double> d = spec.id == UnitFigure::kGemm ? gemm_node_tflops(check, spec)
                                                  : bounded(check.value("value", json()), spec, "value");
  if (!d) return d.take_error();
  return to_milli(*d, spec.higher_is_better);
}

int64_t median_milli(std::vector<int64_t> milli, bool higher_is_better) {
  assert(!milli.empty());
  std::sort(milli.begin(), milli.end());
  const std::size_t n = milli.size();
  if (n % 2 == 1) return milli[n / 2];
  // Each is at most 1e10 (the bounds), so the sum cannot wrap.
  const int64_t sum = milli[n / 2 - 1] + milli[n / 2];
  return higher_is_better ? sum / 2 : sum / 2 + sum % 2;
}

FigureMeasurement measure_figure(const std::vector<ValidationRecord>& reports, const FigureSpec& spec,
                                 std::string_view check, std::string_view profile, std::string_view kind) {
  FigureMeasurement out;
  out.id = spec.id;
  out.check = std::string(check);
  std::map<std::string, bool> decided;  // node -> its newest verdict was read
  std::vector<int64_t> p99s;
  for (const ValidationRecord& r : reports) {
    if (decided.count(r.node_id) != 0) continue;
    if (!r.report.is_object()) continue;
    auto checks = r.report.find("checks");
    if (checks == r.report.end() || !checks->is_array()) continue;
    const json* entry = nullptr;
    for (const json& c : *checks)
      if (c.is_object() && c.value("name", "") == check) {
        entry = &c;
        break;
      }
    if (entry == nullptr) continue;
    const std::string status = entry->value("status", "");
    if (status != "pass" && status != "fail") continue;  // skipped: an older run may say more
    decided[r.node_id] = true;
    if (status == "fail") {
      ++out.failing_nodes;
      continue;
    }
    Result<int64_t> milli = read_figure_milli(*entry, spec);
    if (!milli) {
      if (out.refused_reports++ == 0) out.first_refusal = "report " + r.id + ": " + milli.error().message;
      continue;
    }
    NodeFigure f{r.node_id, r.id, *milli, std::nullopt};
    if (spec.id == UnitFigure::kGpudirectRdmaLatency) {
      const json details = entry->value("details", json::object());
      const json p99 = details.is_object() ? details.value("p99_us", json()) : json();
      // The p99 is optional (ib_*_lat prints it only with a percentile
      // column); a present but implausible one refuses the report's p99, not
      // its typical figure.
      if (!p99.is_null()) {
        if (Result<double> d = bounded(p99, spec, "details.p99_us")) f.p99_milli = to_milli(*d, false);
      }
      if (f.p99_milli) p99s.push_back(*f.p99_milli);
    }
    out.nodes.push_back(std::move(f));
  }
  std::sort(out.nodes.begin(), out.nodes.end(),
            [](const NodeFigure& a, const NodeFigure& b) { return a.milli < b.milli; });
  if (!out.nodes.empty()) {
    std::vector<int64_t> values;
    for (const NodeFigure& f : out.nodes) values.push_back(f.milli);
    out.median_milli = median_milli(std::move(values), spec.higher_is_better);
    if (!p99s.empty()) out.p99_median_milli = median_milli(std::move(p99s), false);
    return out;
  }
  if (decided.empty()) {
    out.not_measured = "no passing report of a " + std::string(kind) + " node of " + std::string(profile) +
                       " in the window ran " + std::string(check);
  } else {
    out.not_measured = "no " + std::string(kind) + " node of " + std::string(profile) + " has a usable " +
                       std::string(check) + " figure: " + plural(out.failing_nodes, "node", "nodes") +
                       " failed it, " + plural(out.refused_reports, "report", "reports") + " refused";
    if (!out.first_refusal.empty()) out.not_measured += " (" + out.first_refusal + ")";
  }
  return out;
}

Result<int64_t> price_micros_per_unit_hour(int64_t price_micros_per_second, int64_t measured_milli) {
  if (price_micros_per_second < 0) return Error::invalid("price", "a price is not negative");
  if (measured_milli <= 0) return Error::invalid("measured", "a measured figure is positive");
  using u128 = unsigned __int128;
  const u128 numerator = static_cast<u128>(price_micros_per_second) * 3600u * static_cast<u128>(kFigureScale);
  const u128 den = static_cast<u128>(measured_milli);
  const u128 q = numerator / den + (numerator % den != 0 ? 1u : 0u);
  if (q > static_cast<u128>(std::numeric_limits<int64_t>::max()))
    return Error(Code::kUnprocessable, "the price per measured unit-hour does not fit in 64-bit micro-units");
  return static_cast<int64_t>(q);
}

const FigureMeasurement& KindUnitPrices::figure(UnitFigure id) const {
  for (const FigureMeasurement& f : figures)
    if (f.id == id) return f;
  assert(false && "unit_prices fills every figure");
  return figures.front();
}

namespace {

// The price of one unit-hour of `f`, or the reason there is none.
void price_of(const KindUnitPrices& k, const FigureMeasurement& f, std::string_view profile, std::string_view kind,
              std::optional<int64_t>& price, std::string& reason) {
  if (!k.price_micros_per_second) {
    reason = "profile " + std::string(profile) + " has no " + std::string(kind) + " price";
    return;
  }
  if (!f.median_milli) {
    reason = std::string(figure_spec(f.id).field) + " not measured: " + f.not_measured;
    return;
  }
  Result<int64_t> p = price_micros_per_unit_hour(*k.price_micros_per_second, *f.median_milli);
  if (!p) {
    reason = p.error().message;
    return;
  }
  price = *p;
}

}  // namespace

KindUnitPrices unit_prices(const json& profile_doc, std::string_view profile, NodeKind node_kind,
                           const std::vector<ValidationRecord>& reports) {
  KindUnitPrices k;
  const std::string_view kind = to_string(node_kind);
  if (listed_price_per_second(profile_doc, node_kind)) {
    // The ledger's reading of the price (rounded to the micro, bounded), so
    // the figures here and the bill agree.
    k.price_micros_per_second = price_micros_per_second(profile_doc, node_kind);
    k.price_micros_per_hour = *k.price_micros_per_second * 3600;  // <= 3.6e12: fits
  }
  for (const FigureSpec& spec : unit_figures()) {
    switch (spec.id) {
      case UnitFigure::kGemm:
        k.figures.push_back(measure_figure(reports, spec, "gemm", profile, kind));
        break;
      case UnitFigure::kNcclBusbw: {
        // The node's own all-reduce first (every node runs it); a profile
        // whose nodes measured only the multi-node round (one GPU each) is
        // priced by that. Never a mix of the two in one median.
        FigureMeasurement single = measure_figure(reports, spec, "nccl_allreduce", profile, kind);
        if (!single.median_milli) {
          FigureMeasurement multi = measure_figure(reports, spec, "nccl_multinode", profile, kind);
          if (multi.median_milli) {
            k.figures.push_back(std::move(multi));
            break;
          }
          single.not_measured += "; and nccl_multinode: " + multi.not_measured;
        }
        k.figures.push_back(std::move(single));
        break;
      }
      case UnitFigure::kGpudirectRdmaLatency:
        k.figures.push_back(measure_figure(reports, spec, "gpudirect_rdma_latency", profile, kind));
        break;
      case UnitFigure::kNcclLatency:
        k.figures.push_back(measure_figure(reports, spec, "nccl_latency", profile, kind));
        break;
    }
  }
  price_of(k, k.figure(UnitFigure::kGemm), profile, kind, k.price_per_tflop_hour, k.price_per_tflop_hour_not_measured);
  price_of(k, k.figure(UnitFigure::kNcclBusbw), profile, kind, k.price_per_nccl_gbps_hour,
           k.price_per_nccl_gbps_hour_not_measured);
  return k;
}

}  // namespace kiln
