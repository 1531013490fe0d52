#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gpu_checks.h"
#include "agent/gpucheck/kernels.h"

namespace kiln::gpucheck {

namespace {

struct HbmOutcome {
  double best_gbps = 0;
  double mean_gbps = 0;
  std::size_t bytes = 0;
  std::string error;
};

// Times the copy kernel on one device. The buffers shrink to fit a GPU with
// less free memory than asked (a quarter of what is free each).
HbmOutcome measure_hbm(int dev, const GpucheckOptions& opts) {
  HbmOutcome o;
  auto fail = [&](const char* call, cudaError_t e) {
    o.error = cuda_error(call, e);
    return o;
  };
  if (cudaError_t e = cudaSetDevice(dev); e != cudaSuccess) return fail("cudaSetDevice", e);
  std::size_t free_b = 0, total_b = 0;
  if (cudaError_t e = cudaMemGetInfo(&free_b, &total_b); e != cudaSuccess) return fail("cudaMemGetInfo", e);
  std::size_t bytes = std::min<std::size_t>(opts.hbm_mib << 20, free_b / 4);
  bytes = bytes / (1 << 20) * (1 << 20);
  if (bytes < (1 << 20)) {
    o.error = "less than 4 MiB of device memory free";
    return o;
  }
  o.bytes = bytes;
  DeviceBuffer src, dst;
  Stream stream;
  EventTimer timer;
  if (cudaError_t e = src.allocate(bytes); e != cudaSuccess) return fail("cudaMalloc", e);
  if (cudaError_t e = dst.allocate(bytes); e != cudaSuccess) return fail("cudaMalloc", e);
  if (cudaError_t e = stream.create(); e != cudaSuccess) return fail("cudaStreamCreate", e);
  if (timer.error() != cudaSuccess) return fail("cudaEventCreate", timer.error());
  if (cudaError_t e = cudaMemsetAsync(src.get(), 0x5a, bytes, stream.get()); e != cudaSuccess)
    return fail("cudaMemset", e);
  if (cudaError_t e = cudaMemsetAsync(dst.get(), 0, bytes, stream.get()); e != cudaSuccess)
    return fail("cudaMemset", e);
  // One untimed launch: first-touch page mapping and clock ramp-up.
  if (cudaError_t e = launch_copy(src.get(), dst.get(), bytes, stream.get()); e != cudaSuccess)
    return fail("copy kernel", e);
  double sum = 0;
  for (int it = 0; it < opts.iterations; ++it) {
    timer.start(stream.get());
    if (cudaError_t e = launch_copy(src.get(), dst.get(), bytes, stream.get()); e != cudaSuccess)
      return fail("copy kernel", e);
    timer.stop(stream.get());
    const float ms = timer.elapsed_ms();
    if (ms <= 0) return fail("copy kernel", cudaGetLastError());
    const double gbps = 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
    o.best_gbps = std::max(o.best_gbps, gbps);
    sum += gbps;
  }
  o.mean_gbps = sum / opts.iterations;
  // Prove the kernel copied: both ends of the destination hold the pattern.
  std::vector<unsigned char> head(4096), tail(4096);
  if (cudaError_t e = cudaMemcpy(head.data(), dst.get(), head.size(), cudaMemcpyDeviceToHost); e != cudaSuccess)
    return fail("cudaMemcpy", e);
  if (cudaError_t e = cudaMemcpy(tail.data(), static_cast<char*>(dst.get()) + bytes - tail.size(), tail.size(),
                                 cudaMemcpyDeviceToHost);
      e != cudaSuccess)
    return fail("cudaMemcpy", e);
  for (std::size_t i = 0; i < head.size(); ++i)
    if (head[i] != 0x5a || tail[i] != 0x5a) {
      o.error = "copy kernel produced wrong data";
      return o;
    }
  return o;
}

}  // namespace

agent::CheckResult check_hbm_bandwidth(const GpucheckOptions& opts, int devices) {
  agent::CheckResult r;
  r.name = "hbm_bandwidth";
  r.unit = "GB/s";
  r.status = agent::CheckStatus::kPass;
  if (opts.hbm_min_gbps) r.threshold = {{"min", *opts.hbm_min_gbps}};
  nlohmann::json gpus = nlohmann::json::array();
  double worst = -1;
  for (int dev = 0; dev < devices; ++dev) {
    const DeviceInfo info = device_info(dev);
    const HbmOutcome o = measure_hbm(dev, opts);
    nlohmann::json j = {{"index", dev}, {"name", info.name}, {"pci_bus_id", info.pci_bus_id}};
    const std::string id = "GPU" + std::to_string(dev);
    if (!o.error.empty()) {
      j["error"] = o.error;
      agent::add_failure(r, id + ": " + o.error);
    } else {
      j["best_gbps"] = o.best_gbps;
      j["mean_gbps"] = o.mean_gbps;
      j["buffer_bytes"] = o.bytes;
      worst = worst < 0 ? o.best_gbps : std::min(worst, o.best_gbps);
      if (opts.hbm_min_gbps && o.best_gbps < *opts.hbm_min_gbps) {
        char b[160];
        std::snprintf(b, sizeof b, "%s: HBM copy %.0f GB/s, expected at least %.0f GB/s", id.c_str(), o.best_gbps,
                      *opts.hbm_min_gbps);
        agent::add_failure(r, b);
      }
    }
    gpus.push_back(std::move(j));
  }
  r.details["gpus"] = gpus;
  r.details["method"] = "device-to-device copy kernel; GB/s counts bytes read plus bytes written; best of " +
                        std::to_string(opts.iterations);
  if (worst >= 0) r.value = worst;
  return r;
}

}  // namespace kiln::gpucheck
