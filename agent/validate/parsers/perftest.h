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
// create MR", "Segmentation fault") or when no result row was printed. Low
// bandwidth is left to the gate's threshold.

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses perftest output. kInvalidArgument when nothing in the text is
// perftest's (no test title, settings, result table, CUDA set-up or RDMA error).
Result<nlohmann::json> parse_perftest(std::string_view text);

}  // namespace kiln::agent
