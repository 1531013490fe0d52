#pragma once
// Parser for linux-rdma perftest output (ib_write_bw, ib_read_bw, ib_send_bw,
// the *_lat tools), client or server side, with or without --use_cuda.
//
// The settings block ("Dual-port : OFF\t\tDevice : mlx5_5", two settings per
// line, tab- or space-padded, labels with spaces or a tab inside) is split into
// key/value pairs; the result table is mapped by its header ("#bytes
// #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]", or [MB/sec],
// or latency columns). Runs cut short (--run_infinitely, no closing dashed
// line) and runs that never reach the table (MR registration failure) parse.
//
// Result shape:
//   {
//     "format": "perftest",
//     "test": "RDMA_Write BW Test" | null, "kind": "bw" | "lat" | null,
//     "settings": {"Dual-port": "OFF", "Device": "mlx5_5", ...},   // as printed
//     "device", "transport", "link_type", "connection_type": str | null,
//     "mtu": int | null, "gid_index", "qps", "tx_depth", "cq_moderation", "post_list": int | null,
//     "rdma_cm": bool | null,
//     "use_cuda": bool, "cuda": {"device_index", "device_name", "pci_address", "buffer_bytes"} | null,
//     "local": [{"lid","qpn","psn","gid",..}], "remote": [...],
//     "columns": ["#bytes", ...], "bw_unit": "Gb/sec" | "MB/sec" | null,
//     "rows": [{"bytes", "iterations", "bw_peak", "bw_average", "msg_rate_mpps", ...}],
//     "table_closed": bool,                    // closing dashed line seen (false: run interrupted)
//     "bw_average_max": double | null, "bw_peak_max": double | null,
//     "warnings": [str], "errors": [str],
//     "status": "pass" | "fail",
//     "health": {...}
//   }
// status/health fail on error lines (e.g. "Couldn't allocate MR", "Failed to
// create MR", "Segmentation fault", "Perftest supports CUDA latency tests with
// read/send verbs only") or when no result row was printed. Low bandwidth and
// high latency are left to the gate's threshold. "Conflicting CPU frequency
// values detected ... CPU Frequency is not max." (printed between the latency
// header and its rows) is a warning: cycle counts were converted at a clock
// the CPU was not running at.
//
// Latency tables map their columns the same way: "t_min[usec]" is the key
// "t_min_usec", "t_typical[usec]" "t_typical_usec", "99% percentile[usec]"
// "99_percentile_usec", "99.9% percentile[usec]" "99_9_percentile_usec".

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses perftest output. kInvalidArgument when nothing in the text is
// perftest's (no test title, settings, result table, CUDA set-up or RDMA error).
Result<nlohmann::json> parse_perftest(std::string_view text);

// One row of a latency table (ib_write_lat, ib_send_lat, ib_read_lat), in
// microseconds as perftest prints them (half the round trip). Old perftest
// versions print only t_min/t_max/t_typical; newer ones add t_avg, t_stdev
// and the 99% / 99.9% percentiles, which are then set.
struct PerftestLatencyRow {
  std::int64_t bytes = 0;
  std::int64_t iterations = 0;
  double min_us = 0, max_us = 0, typical_us = 0;
  std::optional<double> avg_us, stdev_us, p99_us, p999_us;
};

// The typed rows of a parse_perftest() result whose table is a latency table.
// Every value is bounded: bytes in [1, 2^31], iterations >= 1, each time
// finite and in [0, 1e7] us (ten seconds for one message is no measurement).
// Errors (kInvalidArgument, the message naming the row and column): not a
// latency table (no "t_typical" column: a bandwidth table, or the -D duration
// form that prints only t_avg), no rows, or a value out of bounds. Pure.
Result<std::vector<PerftestLatencyRow>> perftest_latency_rows(const nlohmann::json& parsed);

}  // namespace kiln::agent
