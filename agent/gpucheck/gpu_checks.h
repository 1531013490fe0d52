#pragma once
// kiln-gpucheck's checks: the measurements that need CUDA and NCCL. Each
// returns a CheckResult (agent/validate/checks/check_result.h) and never
// throws; a CUDA or NCCL error becomes a `fail` with the library's words.
// All of them block the calling thread for the length of the measurement and
// leave every device's state as they found it (buffers freed, streams
// destroyed). `devices` is cudaGetDeviceCount()'s answer, at least 1:
// main.cc handles the no-GPU case before calling any of them.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/validate/checks/check_result.h"

namespace kiln::gpucheck {

struct GpucheckOptions {
  std::vector<std::string> checks = {"nvlink", "hbm_bandwidth", "pcie_bandwidth", "nccl_allreduce"};
  int expect_gpus = -1;             // -1: not told; 0: the profile expects none (checks skip)
  int nvlink_links = 0;             // NVLink links expected up per GPU; 0 = none expected
  int iterations = 5;               // timed repetitions; the best one counts
  std::size_t hbm_mib = 1024;       // per buffer (source and destination)
  std::size_t pcie_mib = 256;       // pinned host buffer per transfer
  std::size_t nccl_max_mib = 1024;  // largest all-reduce size (sweep from 1 MiB by x4)
  std::optional<double> hbm_min_gbps, pcie_min_gbps, nccl_min_busbw;
  std::string nvml_library = "libnvidia-ml.so.1";
};

// NVLink links up per GPU (NVML) vs nvlink_links, and the CUDA peer-access
// matrix. value: fewest links up on any GPU.
agent::CheckResult check_nvlink(const GpucheckOptions& opts, int devices);

// Device-to-device copy kernel per GPU; GB/s = (bytes read + bytes written)
// / time, best of `iterations`. value: the slowest GPU's best.
agent::CheckResult check_hbm_bandwidth(const GpucheckOptions& opts, int devices);

// Pinned host<->device cudaMemcpyAsync per GPU, each direction, best of
// `iterations`. value: the slowest GPU and direction.
agent::CheckResult check_pcie_bandwidth(const GpucheckOptions& opts, int devices);

// ncclCommInitAll over every GPU in this process; float sum all-reduce swept
// up to nccl_max_mib; bus bandwidth = algbw * 2(n-1)/n at the largest size.
// NCCL_DEBUG=INFO goes to a temporary NCCL_DEBUG_FILE that is parsed to
// record the transports NCCL chose. value: busbw GB/s at the largest size.
agent::CheckResult check_nccl_allreduce(const GpucheckOptions& opts, int devices);

}  // namespace kiln::gpucheck
