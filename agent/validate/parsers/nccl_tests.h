#pragma once
// Parser for the stdout of NVIDIA nccl-tests (all_reduce_perf, all_gather_perf,
// gather_perf, ... with or without MPI).
//
// Reads every layout seen in the field: the current table (size count type
// redop root, then time/algbw/busbw/#wrong out-of-place and in-place), the old
// 12-column table (no root, `error` instead of `#wrong`), and newer variants
// with extra columns (#bitdiff, per-iteration stats, timestamp): columns are
// mapped by the header line's names, not by position. Open MPI tags
// ("[1,0]<stdout>:"), interleaved MPI/NCCL log lines and ANSI escapes are skipped.
//
// Result shape (numbers are JSON numbers; bandwidths GB/s, times us):
//   {
//     "format": "nccl-tests",
//     "program": "all_reduce_perf" | null,     // "# Collective test starting:" line
//     "op": "all_reduce" | null,               // from `program`, else inferred from the table
//                                              // (size/count, redop, root) or a "<op>_perf" command in the text
//     "op_source": "header" | "inferred" | "command" | "unknown",
//     "op_candidates": [..],                   // when inference is ambiguous
//     "nccl_tests_version": str | null, "nccl_version": "2.22.3+cuda12.6" | null,
//     "params": {"nthread","ngpus","min_bytes","max_bytes","step","step_kind",
//                "warmup_iters","iters","agg_iters","validation","graph"},  // those printed
//     "table_format": "current" | "old",
//     "devices": [{"rank","group"|null,"pid","host","device","busid","model"}],
//     "nranks": int, "hosts": [str],
//     "rows": [{"size","count","type","redop","root"|null,
//               "out_of_place": {"time_us","algbw","busbw","wrong"|null,"error"|null},
//               "in_place": {...same...}}],
//     "wrong_total": int | null,               // null when validation was off (N/A)
//     "out_of_bounds": {"count": int, "ok": bool} | null,
//     "avg_busbw": double | null, "avg_busbw_check": "OK" | "FAILED" | null,
//     "max_busbw": {"busbw","size","placement": "out_of_place"|"in_place"} | null,
//     "largest_size": {"size","busbw_out_of_place","busbw_in_place",
//                      "algbw_out_of_place","algbw_in_place"} | null,
//     "errors": [str], "warnings": [str],
//     "health": {...}                           // see health.h
//   }
// Health fails on #wrong > 0, out-of-bounds values, an "Avg bus bandwidth ...
// FAILED" check, error lines, no result rows, or a missing footer (run cut short).

#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses nccl-tests stdout. Returns kInvalidArgument when the text holds no
// nccl-tests header or table (empty input, another tool's output).
Result<nlohmann::json> parse_nccl_tests(std::string_view text);

// One small-message point of an nccl-tests table: the out-of-place `time`
// column (microseconds per collective, the latency a small all-reduce costs).
struct NcclLatencyPoint {
  std::int64_t bytes = 0;
  double time_us = 0;
};

// The rows of a parse_nccl_tests() result with size <= `max_bytes`, in table
// order, one per size (a repeated size keeps its first row). Each time must be
// finite and in [0, 1e7] us. Errors (kInvalidArgument, naming the row and
// field): no rows at or under `max_bytes`, a size that is not a positive
// integer, or an out-of-place time missing or out of bounds. Pure.
Result<std::vector<NcclLatencyPoint>> nccl_small_message_latency(const nlohmann::json& parsed,
                                                                 std::int64_t max_bytes = 65536);

}  // namespace kiln::agent
