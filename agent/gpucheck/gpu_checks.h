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

// --multinode: this node's part of nccl_multinode (see check_nccl_multinode).
struct MultinodeOptions {
  bool enabled = false;
  int nodes = 0;                    // processes (nodes) in the communicator
  int node_rank = -1;               // 0..nodes-1
  std::string unique_id;            // "nccl:<256 hex>"; "" on node-rank 0 = create one
  std::size_t max_mib = 1024;       // largest all-reduce size (sweep from 1 MiB by x4)
  int timeout_s = 600;              // from the start: every node joined and the sweep done
  std::optional<double> min_busbw;  // GB/s at the largest size
};

struct GpucheckOptions {
  std::vector<std::string> checks = {"nvlink", "hbm_bandwidth", "pcie_bandwidth", "nccl_allreduce", "gemm"};
  int expect_gpus = -1;             // -1: not told; 0: the profile expects none (checks skip)
  int nvlink_links = 0;             // NVLink links expected up per GPU; 0 = none expected
  int iterations = 5;               // timed repetitions; the best one counts
  std::size_t hbm_mib = 1024;       // per buffer (source and destination)
  std::size_t pcie_mib = 256;       // pinned host buffer per transfer
  std::size_t nccl_max_mib = 1024;  // largest all-reduce size (sweep from 1 MiB by x4)
  std::optional<double> hbm_min_gbps, pcie_min_gbps, nccl_min_busbw;
  // gemm (check_gemm). 20 s lets an SXM GPU settle at the clocks its power
  // limit and cooling sustain (the first seconds run at boost clocks).
  int gemm_seconds = 20;                                   // timed per GPU and type
  std::vector<std::string> gemm_dtypes = {"bf16", "fp8"};  // bf16 first and always; fp8 skipped below CC 8.9
  std::optional<double> gemm_min_tflops;                   // BF16 median per GPU
  std::optional<double> gemm_min_fraction_of_spec;         // of the model's dense spec, every type
  std::string nvml_library = "libnvidia-ml.so.1";
  MultinodeOptions multinode;
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

// Sustained dense GEMM per GPU through cuBLASLt, every GPU at once, for each
// of gemm_dtypes: a short search over shapes and cuBLASLt's proposed
// algorithms, a verified result, then gemm_seconds of back-to-back GEMMs
// timed in ~100 ms windows while NVML is sampled (gemm.cc explains the
// design; gemm_verdict.h the floors, throttle rules and report shape).
// value: the slowest GPU's median BF16 TFLOPS. Blocks for about
// (gemm_seconds + ~3 s) per type; uses ~1.5-3 GiB per GPU.
agent::CheckResult check_gemm(const GpucheckOptions& opts, int devices);

// ncclCommInitAll over every GPU in this process; float sum all-reduce swept
// up to nccl_max_mib; bus bandwidth = algbw * 2(n-1)/n at the largest size.
// NCCL_DEBUG=INFO goes to a temporary NCCL_DEBUG_FILE that is parsed to
// record the transports NCCL chose. value: busbw GB/s at the largest size.
agent::CheckResult check_nccl_allreduce(const GpucheckOptions& opts, int devices);

// nccl_multinode, one process per node (docs/agent-protocol.md, "Multi-node
// collective"): every local GPU is a rank, rank = node_rank * G + local
// index, nranks = nodes * G, where G = expect_gpus when given (fewer local
// GPUs fail; extra ones are left out with a warning) else `devices`. Node-rank
// 0 without a unique id calls ncclGetUniqueId and prints
// {"unique_id": "nccl:<hex of the 128 bytes>"} on stdout (flushed) before it
// waits for the others; that line is how kiln-agent learns the id. Then
// ncclCommInitRankConfig per local GPU inside ncclGroupStart/End with a
// non-blocking config, polled with ncclCommGetAsyncError until every rank
// joined or timeout_s passed (then ncclCommAbort). Float sum all-reduce swept
// 1 MiB by x4 up to max_mib, one warm-up and `iterations` timed rounds per
// size, all within the same timeout_s (each wait polls; a hung peer ends in
// ncclCommAbort and a fail naming the size it stalled at). Rank r
// contributes r+1; both ends of every local result are checked against
// nranks(nranks+1)/2. value: busbw GB/s at the largest size; details: the
// sweep as "sizes", NCCL's transport summary as "transport".
agent::CheckResult check_nccl_multinode(const GpucheckOptions& opts, int devices);

}  // namespace kiln::gpucheck
