#pragma once
// The checks the bare-metal case rests on: what a GPU node does with small
// messages and with storage, measured by the vendors' own tools when they are
// installed (the report shapes are fixed for the portal's price-per-unit rows):
//
//   gpudirect_rdma_latency  `ib_send_lat --use_cuda -a -I 0` loopback between
//                           two local RDMA devices (or one with itself), GPU
//                           buffers on both ends. value: the worst typical
//                           (median) one-way latency in us over 2..64 B;
//                           threshold {"max": thresholds.gpudirect_rdma_latency_us_max};
//                           details {"tool": "ib_send_lat", "sizes": [{"bytes",
//                           "typical_us", "p99_us" | null, "avg_us" | null}],
//                           "p99_us": worst p99 | null}. ib_send_lat, not
//                           ib_write_lat: perftest refuses CUDA buffers in
//                           write-latency runs (the receiver polls host memory),
//                           and refuses a CUDA message not larger than the
//                           inline size, hence -I 0.
//   nccl_latency            `all_reduce_perf -b 8 -e 65536 -f 2 -g <gpus>`.
//                           value: the out-of-place time in us at 8 B;
//                           threshold {"max": thresholds.nccl_latency_us_max};
//                           details {"tool": "all_reduce_perf", "sizes":
//                           [{"bytes", "time_us"}] (8 .. 65536), "nodes": 1}.
//   gds_read                `gdsio` reads of gds.path, GPU-direct (-x 0) then
//                           through host memory (-x 2). value: GPU-direct GB/s
//                           (10^9 B/s); threshold {"min": thresholds.gds_read_gbps_min};
//                           details {"gpu_direct_gbps", "host_bounce_gbps", "ratio"}.
//                           Reads only: the file is never written.
//
// Each is `skip` with the reason when the profile expects no GPU, the tool is
// not installed, there is no RDMA device (and the profile expects none), or
// no gds.path is configured; `fail` with the tool's words when it runs and
// reports a problem, exits non-zero, prints nothing parseable, or times out
// (ToolOptions::timeout). Blocking for the tool's run; call off any I/O thread.

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/profile.h"
#include "agent/validate/checks/tool_checks.h"

namespace kiln::agent {

CheckResult check_gpudirect_rdma_latency(const ValidationProfile& profile, const ToolOptions& opts);
CheckResult check_nccl_latency(const ValidationProfile& profile, const ToolOptions& opts);
CheckResult check_gds_read(const ValidationProfile& profile, const ToolOptions& opts);

}  // namespace kiln::agent
