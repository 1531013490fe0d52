#pragma once
// Parser for NVIDIA nvbandwidth text output (any version; older ones print no
// version header and no SUM line).
//
//   nvbandwidth Version: v0.8 / Built from Git version: / CUDA Runtime Version: /
//   CUDA Driver Version: / Driver Version: / Device N: <name> (<bus id>)
//   Running <testcase>.
//   memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
//              0         1
//    0       N/A     26.34
//   SUM <testcase> 715.53
//
// Result shape:
//   {
//     "format": "nvbandwidth",
//     "version", "git_version", "driver_version": str | null,
//     "cuda_runtime_version", "cuda_driver_version": int | null,
//     "devices": [{"index", "name", "bus_id"}],
//     "tests": [{"name": str | null,          // null when the "Running" line was elided
//                "matrices": [{"title", "unit": "GB/s" | ...,
//                              "row_kind": "GPU", "column_kind": "GPU", "direction": "->" | "<-" | ...,
//                              "columns": [int], "row_ids": [int],
//                              "values": [[double | null]],   // null for N/A
//                              "min", "max", "mean": double | null,  // GPU<->same-kind diagonal excluded
//                              "value_count": int}],
//                "sum": double | null, "waived": bool, "errors": [str]}],
//     "sums": {"<testcase>": double},
//     "errors": [str], "notes": [str],
//     "health": {...}
//   }
// Health fails on data-verification failures ("Invalid value when checking
// the pattern", "ASSERT in expression ..."), CUDA errors, and tests that
// started but printed no result.

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses nvbandwidth stdout. kInvalidArgument when it holds no nvbandwidth
// header, "Running" line, bandwidth matrix or SUM line.
Result<nlohmann::json> parse_nvbandwidth(std::string_view text);

}  // namespace kiln::agent
