#pragma once
// Parser for the summary lines NVIDIA's gdsio (GPUDirect Storage I/O
// benchmark, shipped with cuFile under /usr/local/cuda/gds/tools) prints, one
// per run:
//
//   IoType: READ XferType: GPUD Threads: 1 DataSetSize: 18421760/10485760(KiB)
//   IOSize: 256(KiB) Throughput: 1.919940 GiB/sec, Avg_Latency: 127.156003 usecs
//   ops: 71960 total_time 9.150475 secs
//
// (one line as printed; a wrapped copy, split anywhere between fields, reads
// the same). XferType says which path the data took: GPUD (storage straight
// into GPU memory through cuFile), CPUONLY (storage to host memory), CPU_GPU
// (storage to host memory, then a copy to the GPU: the host bounce), and the
// async/batch variants newer gdsio versions name.
//
// Result shape:
//   {"format": "gdsio",
//    "runs": [{"io_type": "READ", "xfer_type": "GPUD", "threads": 1,
//              "dataset_kib": 18421760, "dataset_target_kib": 10485760,
//              "io_size": "256",                    // as printed: "16384-32768-4096" for a range
//              "throughput_gib_s": 1.91994, "throughput_gb_s": 2.0615..,  // GB/s = 10^9 B/s
//              "avg_latency_us": 127.156003, "ops": 71960, "total_time_s": 9.150475}],
//    "errors": [str], "health": {...}}
//
// Every number is bounded (throughput in [0, 1e6] GiB/s, latency in [0, 1e9]
// us, threads in [1, 65536], ops and sizes non-negative and < 2^53, time in
// [0, 1e7] s); a summary with a field missing or out of bounds is refused as a
// whole with the field named, never half-read. Health fails on error lines
// (gdsio and cuFile print "Error"/"ERROR"/"failed"), on a refused summary, or
// when no summary was printed.

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

// Parses gdsio output (stdout and stderr together). kInvalidArgument when the
// text holds no "IoType:" summary and no error line naming gdsio, cuFile or
// nvidia-fs. Pure.
Result<nlohmann::json> parse_gdsio(std::string_view text);

}  // namespace kiln::agent
