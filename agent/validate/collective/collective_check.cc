#include "agent/validate/collective/collective_check.h"

#include <cstdio>

namespace kiln::agent {

std::vector<std::size_t> sweep_sizes(std::size_t max_mib) {
  const std::size_t max_bytes = (max_mib < 1 ? 1 : max_mib) << 20;
  std::vector<std::size_t> sizes;
  for (std::size_t b = 1 << 20; b < max_bytes; b *= 4) sizes.push_back(b);
  sizes.push_back(max_bytes);
  return sizes;
}

double busbw_factor(int ranks) { return ranks > 1 ? 2.0 * (ranks - 1) / ranks : 0.0; }

SweepPoint sweep_point(std::size_t bytes, double best_us, int ranks) {
  SweepPoint p;
  p.bytes = bytes;
  p.time_us = best_us;
  p.algbw_gbps = best_us > 0 ? static_cast<double>(bytes) / (best_us * 1e-6) / 1e9 : 0.0;
  p.busbw_gbps = p.algbw_gbps * busbw_factor(ranks);
  return p;
}

CheckResult multinode_check(const CollectiveArgs& args, int ranks) {
  CheckResult r;
  r.name = kMultinodeCheckName;
  r.status = CheckStatus::kPass;
  r.unit = "GB/s";
  r.details = {{"collective", collective_kind_name(args.collective)},
               {"run", args.run},
               {"rank", args.rank},
               {"nodes", args.nodes},
               {"ranks", ranks},
               {"sizes", nlohmann::json::array()}};
  if (args.min_busbw_gbps) r.threshold = {{"min", *args.min_busbw_gbps}};
  return r;
}

void add_sweep_point(CheckResult& r, const SweepPoint& p) {
  r.details["sizes"].push_back(
      {{"bytes", p.bytes}, {"time_us", p.time_us}, {"algbw_gbps", p.algbw_gbps}, {"busbw_gbps", p.busbw_gbps}});
}

void apply_min_busbw(CheckResult& r, std::optional<double> min_gbps) {
  r.threshold = min_gbps ? nlohmann::json{{"min", *min_gbps}} : nlohmann::json();
  if (!min_gbps || r.status != CheckStatus::kPass || !r.value.is_number()) return;
  const double busbw = r.value.get<double>();
  if (busbw >= *min_gbps) return;
  std::size_t largest = 0;
  const nlohmann::json& sizes = r.details.contains("sizes") ? r.details["sizes"] : nlohmann::json();
  if (sizes.is_array() && !sizes.empty() && sizes.back().is_object() && sizes.back().contains("bytes") &&
      sizes.back()["bytes"].is_number_unsigned())
    largest = sizes.back()["bytes"].get<std::size_t>();
  char b[200];
  std::snprintf(b, sizeof b, "all-reduce bus bandwidth %.2f GB/s at %zu MiB, expected at least %.2f GB/s", busbw,
                largest >> 20, *min_gbps);
  add_failure(r, b);
}

}  // namespace kiln::agent
