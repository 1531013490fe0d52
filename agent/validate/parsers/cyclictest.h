#pragma once
// Parser for rt-tests cyclictest output: the per-thread summary lines, the
// histogram (-h/--histogram), and the --json file (rt-tests 2.x).
//
//   # /dev/cpu_dma_latency set to 0us
//   policy: fifo: loadavg: 1.04 1.00 0.54 1/150 2022
//   T: 0 ( 2013) P:80 I:200 C:1546988 Min:      6 Act:   18 Avg:   16 Max:     306
//   # Histogram
//   000010 603045	000120          (one count column per thread)
//   # Total: 001999931 / # Min Latencies: / # Avg Latencies: / # Max Latencies: /
//   # Histogram Overflows: 00000
//
// `C:` may or may not be followed by spaces. Live captures repeat the T:
// lines with cursor-movement escapes; the last line per thread wins.
// Latencies are microseconds.
//
// Result shape:
//   {
//     "format": "cyclictest",
//     "source": "text" | "json",
//     "header": {"cpu_dma_latency_us": int|null, "policy": str|null, "loadavg": str|null},
//     "threads": [{"thread", "tid"|null, "priority"|null, "interval_us"|null, "cycles",
//                  "min_us", "act_us"|null, "avg_us", "max_us", "cpu"|null,
//                  "histogram": {"<us>": count} (json only), "histogram_total" (json only)}],
//     "histogram": {"buckets": [{"latency_us", "counts": [per thread]}],
//                   "total", "min_us", "avg_us", "max_us", "overflows": [per thread]} | null,
//     "json": {"file_version", "cmdline", "rt_test_version", "start_time", "end_time",
//              "return_code", "num_threads", "resolution_in_ns", "sysinfo"} | null,
//     "thread_count": int,
//     "max_latency_us": number | null,       // worst over threads / histogram footer
//     "health": {...}
//   }
// Health fails on histogram overflows, a non-zero JSON return_code, or a
// thread with no cycles. The latency budget (e.g. 100 us) is the gate's call.

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses cyclictest text or JSON output. kInvalidArgument when there is no
// "T:" line, no "# Histogram" block and no cyclictest JSON object.
Result<nlohmann::json> parse_cyclictest(std::string_view text);

}  // namespace kiln::agent
