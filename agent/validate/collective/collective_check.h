#pragma once
// The one check a multi-node collective reports (docs/agent-protocol.md):
//
//   {"name": "nccl_multinode", "status": "pass" | "fail", "value": <busbw GB/s
//    at the largest size> | null, "unit": "GB/s", "threshold": {"min": X} | null,
//    "details": {"collective", "run", "rank", "nodes", "ranks",
//                "sizes": [{"bytes", "time_us", "algbw_gbps", "busbw_gbps"}],
//                "transport": {...}, "reason": "<when it failed>"}}
//
// Shared by both collectives so their reports cannot drift apart. GB is 1e9
// bytes; busbw = algbw * 2(n-1)/n, as nccl-tests computes it.

#include <cstddef>
#include <optional>
#include <vector>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/collective/collective_args.h"

namespace kiln::agent {

inline constexpr const char* kMultinodeCheckName = "nccl_multinode";

// The sizes a sweep measures, in bytes: 1 MiB, 4 MiB, ... (x4) and always
// max_mib itself last (max_mib 1 is the single size 1 MiB).
std::vector<std::size_t> sweep_sizes(std::size_t max_mib);

// 2(n-1)/n for n ranks (0 for a single rank).
double busbw_factor(int ranks);

// One measured size of a sweep.
struct SweepPoint {
  std::size_t bytes = 0;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
};

// A point from the best round's time for `ranks` ranks.
SweepPoint sweep_point(std::size_t bytes, double best_us, int ranks);

// The check as it starts: pass, value null, unit GB/s, threshold from
// args.min_busbw_gbps; details collective, run, rank, nodes, ranks and an
// empty sizes list.
CheckResult multinode_check(const CollectiveArgs& args, int ranks);

// Appends `p` to details.sizes.
void add_sweep_point(CheckResult& r, const SweepPoint& p);

// Sets threshold {"min": min} (null when there is no floor) and, when the
// check passed with a value below it, fails it with the reason (naming the
// largest size in details.sizes). A check that already failed keeps its
// first reason; one with a null value is not compared (it measured nothing).
void apply_min_busbw(CheckResult& r, std::optional<double> min_gbps);

}  // namespace kiln::agent
