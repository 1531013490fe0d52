#include <nccl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gpu_checks.h"
#include "agent/gpucheck/kernels.h"
#include "agent/gpucheck/nccl_debug_log.h"
#include "agent/gpucheck/nccl_error.h"

namespace kiln::gpucheck {

namespace {

// Per-GPU state for the sweep; destroyed with its device current.
struct Rank {
  int device = 0;
  int sm_count = 0;
  ncclComm_t comm = nullptr;
  DeviceBuffer send, recv;
  Stream stream;
  std::unique_ptr<EventTimer> timer;
};

struct SweepPoint {
  std::size_t bytes;
  double time_us;
  double algbw;
  double busbw;
};

}  // namespace

agent::CheckResult check_nccl_allreduce(const GpucheckOptions& opts, int devices) {
  agent::CheckResult r;
  r.name = "nccl_allreduce";
  r.unit = "GB/s";
  r.status = agent::CheckStatus::kPass;
  if (opts.nccl_min_busbw) r.threshold = {{"min", *opts.nccl_min_busbw}};
  int version = 0;
  ncclGetVersion(&version);
  r.details["nccl_version"] = version;
  r.details["ranks"] = devices;

  // Before ncclCommInitAll below, the call that makes NCCL read its environment.
  NcclDebugLog debug_log;

  std::vector<Rank> ranks(static_cast<std::size_t>(devices));
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(devices), nullptr);
  std::vector<int> devs(static_cast<std::size_t>(devices));
  for (int d = 0; d < devices; ++d) devs[d] = d;
  const std::size_t max_bytes = std::max<std::size_t>(opts.nccl_max_mib, 1) << 20;
  const std::size_t max_count = max_bytes / sizeof(float);

  std::string error;
  for (int d = 0; d < devices && error.empty(); ++d) {
    Rank& k = ranks[d];
    k.device = d;
    k.sm_count = device_info(d).sm_count;
    cudaError_t e = cudaSetDevice(d);
    if (e == cudaSuccess) e = k.send.allocate(max_bytes);
    if (e == cudaSuccess) e = k.recv.allocate(max_bytes);
    if (e == cudaSuccess) e = k.stream.create();
    if (e == cudaSuccess) {
      k.timer = std::make_unique<EventTimer>();
      e = k.timer->error();
    }
    // Rank d contributes d+1 everywhere, so the sum is n(n+1)/2 exactly.
    if (e == cudaSuccess)
      e = launch_fill(static_cast<float*>(k.send.get()), max_count, static_cast<float>(d + 1), k.sm_count,
                      k.stream.get());
    if (e == cudaSuccess) e = cudaStreamSynchronize(k.stream.get());
    if (e != cudaSuccess) error = "GPU" + std::to_string(d) + ": " + cuda_error("set-up", e);
  }
  if (error.empty()) {
    if (ncclResult_t rc = ncclCommInitAll(comms.data(), devices, devs.data()); rc != ncclSuccess)
      error = nccl_error("ncclCommInitAll", rc);
    else
      for (int d = 0; d < devices; ++d) ranks[d].comm = comms[d];
  }

  // Sweep 1 MiB, 4 MiB, ... up to the largest size (always measured).
  std::vector<SweepPoint> sweep;
  std::vector<std::size_t> sizes;
  for (std::size_t b = std::min<std::size_t>(1 << 20, max_bytes); b < max_bytes; b *= 4) sizes.push_back(b);
  sizes.push_back(max_bytes);
  const double factor = devices > 1 ? 2.0 * (devices - 1) / devices : 0.0;
  for (std::size_t bytes : sizes) {
    if (!error.empty()) break;
    const std::size_t count = bytes / sizeof(float);
    const int iters = bytes >= (256u << 20) ? std::max(2, opts.iterations) : std::max(5, opts.iterations * 2);
    double best_us = -1;
    for (int it = 0; it <= iters && error.empty(); ++it) {  // iteration 0 warms up
      for (auto& k : ranks) {
        cudaSetDevice(k.device);
        k.timer->start(k.stream.get());
      }
      ncclResult_t rc = ncclGroupStart();
      for (auto& k : ranks) {
        if (rc != ncclSuccess) break;
        rc = ncclAllReduce(k.send.get(), k.recv.get(), count, ncclFloat, ncclSum, k.comm, k.stream.get());
      }
      const ncclResult_t end_rc = ncclGroupEnd();
      if (rc == ncclSuccess) rc = end_rc;
      if (rc != ncclSuccess) {
        error = nccl_error("ncclAllReduce", rc);
        break;
      }
      double slowest_ms = 0;
      for (auto& k : ranks) {
        cudaSetDevice(k.device);
        k.timer->stop(k.stream.get());
        const float ms = k.timer->elapsed_ms();
        if (ms < 0) {
          error = "GPU" + std::to_string(k.device) + ": " + cuda_error("all-reduce", cudaGetLastError());
          break;
        }
        slowest_ms = std::max(slowest_ms, static_cast<double>(ms));
      }
      if (it > 0 && error.empty()) best_us = best_us < 0 ? slowest_ms * 1e3 : std::min(best_us, slowest_ms * 1e3);
    }
    if (!error.empty()) break;
    const double algbw = static_cast<double>(bytes) / (best_us * 1e-6) / 1e9;
    sweep.push_back({bytes, best_us, algbw, algbw * factor});
  }

  // Correctness at the largest size: both ends of every rank's result.
  if (error.empty()) {
    const float expect = static_cast<float>(devices) * (devices + 1) / 2.0f;
    std::vector<float> head(1024), tail(1024);
    for (auto& k : ranks) {
      cudaSetDevice(k.device);
      cudaError_t e = cudaMemcpy(head.data(), k.recv.get(), head.size() * sizeof(float), cudaMemcpyDeviceToHost);
      if (e == cudaSuccess)
        e = cudaMemcpy(tail.data(), static_cast<float*>(k.recv.get()) + max_count - tail.size(),
                       tail.size() * sizeof(float), cudaMemcpyDeviceToHost);
      if (e != cudaSuccess) {
        error = "GPU" + std::to_string(k.device) + ": " + cuda_error("cudaMemcpy", e);
        break;
      }
      const auto wrong = std::count_if(head.begin(), head.end(), [&](float v) { return v != expect; }) +
                         std::count_if(tail.begin(), tail.end(), [&](float v) { return v != expect; });
      if (wrong > 0) {
        error = "GPU" + std::to_string(k.device) + ": all-reduce result wrong in " + std::to_string(wrong) +
                " of 2048 sampled values";
        break;
      }
    }
  }
  for (auto& k : ranks) {
    cudaSetDevice(k.device);
    if (k.comm) ncclCommDestroy(k.comm);
    k.comm = nullptr;
  }
  for (auto it = ranks.rbegin(); it != ranks.rend(); ++it) {
    cudaSetDevice(it->device);
    it->timer.reset();
  }
  // Free buffers and streams with each device current.
  while (!ranks.empty()) {
    cudaSetDevice(ranks.back().device);
    ranks.pop_back();
  }

  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : sweep)
    points.push_back({{"bytes", p.bytes}, {"time_us", p.time_us}, {"algbw_gbps", p.algbw}, {"busbw_gbps", p.busbw}});
  r.details["sweep"] = points;
  if (!error.empty()) agent::add_failure(r, error);
  if (!sweep.empty() && sweep.back().bytes == max_bytes) {
    r.value = sweep.back().busbw;
    r.details["largest_bytes"] = max_bytes;
    r.details["algbw_gbps"] = sweep.back().algbw;
    if (devices == 1) {
      // The report must not show a floor it did not apply: a pass at 0 under
      // "min 400" reads as a broken check (seen on a 1-GPU H100).
      r.threshold = nullptr;
      agent::add_warning(r, "one GPU: bus bandwidth is 0 by definition (2(n-1)/n); algbw recorded, no floor applied");
    } else if (opts.nccl_min_busbw && sweep.back().busbw < *opts.nccl_min_busbw) {
      char b[200];
      std::snprintf(b, sizeof b, "all-reduce bus bandwidth %.1f GB/s at %zu MiB, expected at least %.1f GB/s",
                    sweep.back().busbw, max_bytes >> 20, *opts.nccl_min_busbw);
      agent::add_failure(r, b);
    }
  }

  // What NCCL chose, from its own log.
  {
    auto parsed = debug_log.parse();
    if (!parsed) {
      agent::add_warning(r, parsed.error().message);
    } else {
      const auto& p = *parsed;
      nlohmann::json summary = p.value("summary", nlohmann::json::object());
      r.details["nccl_debug"] = {{"summary", summary},
                                 {"connection_counts", p.value("connection_counts", nlohmann::json::object())},
                                 {"ring_channels", p.value("ring_channels", nlohmann::json())},
                                 {"warnings", p.value("warnings", nlohmann::json::array())},
                                 {"nccl_version", p.value("nccl_version", nlohmann::json())}};
      if (opts.nvlink_links > 0 && devices > 1) {
        for (const auto& t : summary.value("transports", nlohmann::json::array())) {
          const std::string s = t.is_string() ? t.get<std::string>() : "";
          if (s.rfind("P2P", 0) != 0)
            agent::add_failure(r, "NCCL used " + s + " between local GPUs where NVLink P2P is expected");
        }
      }
    }
  }
  return r;
}

}  // namespace kiln::gpucheck
