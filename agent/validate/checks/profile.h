#pragma once
// ValidationProfile: what a node's profile expects, as the checks read it.
//
// kilnd sends the profile JSON with the plan; every field is optional and a
// missing one means "not checked" (or the default below). Shape:
//
//   {
//     "name": "h100-sxm-8x",
//     "gpu":   {"count": 8, "model": "H100", "memory_gib_min": 79,
//               "driver_min": "550.54", "cuda_min": "12.4",
//               "xid_ignore": [13, 43]},             // XIDs not held against the node
//     "nvlink": {"links_per_gpu": 18},               // 0 or absent: no NVLink expected
//     "pcie":  {"strict_gpu_speed": false},          // see pcie_links.h
//     "rdma":  {"ports": 8, "rate_gbps": 400, "require_peermem": true},
//     "nvme":  {"devices": 1, "path": "/dev/nvme0n1", "read_mib": 2048},
//     "jitter": {"duration_s": 5, "cpu": 2},
//     "thresholds": {
//       "hbm_gbps_min": 4080, "pcie_gbps_min": 48, "nccl_busbw_gbps_min": 450,
//       "nvme_gbps_min": 5.0, "jitter_p999_us_max": 50, "jitter_max_us_max": 1000,
//       "ib_write_bw_gbps_min": 350,
//       "gemm_tflops_min": 700, "gemm_fraction_of_spec_min": 0.7,
//       "gpudirect_rdma_latency_us_max": 2.5,   // ib_send_lat --use_cuda, worst typical at 2..64 B
//       "nccl_latency_us_max": 40,              // all_reduce_perf out-of-place time at 8 B
//       "gds_read_gbps_min": 10                 // gdsio GPU-direct read
//     },
//     "gds": {"path": "/mnt/nvme/gds-read.bin"} // a file gds_read reads (never writes); "" = skip
//   }
//
// A threshold left out is not applied: the figure is recorded and the check
// passes on its other conditions.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

struct ValidationProfile {
  std::string name;

  // GPUs. count 0: the node has no GPU and every GPU check is a skip.
  int gpu_count = 0;
  std::string gpu_model;                       // case-insensitive substring of the NVML name
  std::optional<double> gpu_memory_gib_min;
  std::string driver_min;                      // dotted version, "" = not checked
  std::string cuda_min;
  std::vector<int> xid_ignore;

  int nvlink_links_per_gpu = 0;
  // GPUs drop their PCIe link to Gen1 when idle, so by default a GPU whose
  // link *speed* is below maximum is a warning; its width must still be full.
  bool pcie_strict_gpu_speed = false;

  int rdma_ports = 0;                          // ACTIVE ports expected
  std::optional<double> rdma_rate_gbps;        // per port
  bool rdma_require_peermem = true;            // when rdma_ports > 0

  int nvme_devices = 0;
  std::string nvme_path;                       // "" = first /sys/block/nvme*
  int nvme_read_mib = 1024;

  double jitter_duration_s = 2.0;
  int jitter_cpu = -1;                         // -1 = the CPU the agent runs on

  std::optional<double> hbm_gbps_min;
  std::optional<double> pcie_gbps_min;
  std::optional<double> nccl_busbw_gbps_min;
  std::optional<double> nvme_gbps_min;
  std::optional<double> jitter_p999_us_max;
  std::optional<double> jitter_max_us_max;
  std::optional<double> ib_write_bw_gbps_min;
  std::optional<double> gpudirect_rdma_latency_us_max;
  std::optional<double> nccl_latency_us_max;
  std::optional<double> gds_read_gbps_min;

  // A file on a GPUDirect-Storage-capable filesystem that gds_read reads
  // (read only); "" = gds_read is skipped with that reason.
  std::string gds_path;
  // gemm (kiln-gpucheck): a BF16 TFLOPS floor per GPU, and a fraction
  // (0, 1] of the model's dense spec applied to every type it measures.
  std::optional<double> gemm_tflops_min;
  std::optional<double> gemm_fraction_of_spec_min;

  // Reads the JSON above. kInvalidArgument (naming the field as a JSON
  // pointer) when a present field has the wrong type or a negative count.
  static Result<ValidationProfile> from_json(const nlohmann::json& j);
};

// Compares dotted numeric versions ("550.54.15" vs "550.54"): negative, 0 or
// positive like strcmp. Missing components count as 0; non-digits end a part.
int compare_versions(const std::string& a, const std::string& b);

}  // namespace kiln::agent
