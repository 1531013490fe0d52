#include <algorithm>
#include <cstdio>
#include <cstring>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gpu_checks.h"

namespace kiln::gpucheck {

namespace {

struct PcieOutcome {
  double h2d_gbps = 0;
  double d2h_gbps = 0;
  std::string error;
};

// Best of `iterations` for one direction.
double best_copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t s,
                 EventTimer& timer, int iterations, std::string& error) {
  double best = 0;
  for (int it = 0; it <= iterations; ++it) {  // iteration 0 warms up and is not counted
    timer.start(s);
    if (cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, s); e != cudaSuccess) {
      error = cuda_error("cudaMemcpyAsync", e);
      return 0;
    }
    timer.stop(s);
    const float ms = timer.elapsed_ms();
    if (ms <= 0) {
      error = cuda_error("cudaEventElapsedTime", cudaGetLastError());
      return 0;
    }
    if (it > 0) best = std::max(best, static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
  }
  return best;
}

PcieOutcome measure_pcie(int dev, const GpucheckOptions& opts) {
  PcieOutcome o;
  auto fail = [&](const char* call, cudaError_t e) {
    o.error = cuda_error(call, e);
    return o;
  };
  if (cudaError_t e = cudaSetDevice(dev); e != cudaSuccess) return fail("cudaSetDevice", e);
  const std::size_t bytes = opts.pcie_mib << 20;
  PinnedBuffer host;
  DeviceBuffer device;
  Stream stream;
  EventTimer timer;
  if (cudaError_t e = host.allocate(bytes); e != cudaSuccess) return fail("cudaHostAlloc", e);
  if (cudaError_t e = device.allocate(bytes); e != cudaSuccess) return fail("cudaMalloc", e);
  if (cudaError_t e = stream.create(); e != cudaSuccess) return fail("cudaStreamCreate", e);
  if (timer.error() != cudaSuccess) return fail("cudaEventCreate", timer.error());
  std::memset(host.get(), 0x3c, bytes);  // touch every page before timing
  o.h2d_gbps = best_copy(device.get(), host.get(), bytes, cudaMemcpyHostToDevice, stream.get(), timer,
                         opts.iterations, o.error);
  if (!o.error.empty()) return o;
  o.d2h_gbps = best_copy(host.get(), device.get(), bytes, cudaMemcpyDeviceToHost, stream.get(), timer,
                         opts.iterations, o.error);
  return o;
}

}  // namespace

agent::CheckResult check_pcie_bandwidth(const GpucheckOptions& opts, int devices) {
  agent::CheckResult r;
  r.name = "pcie_bandwidth";
  r.unit = "GB/s";
  r.status = agent::CheckStatus::kPass;
  if (opts.pcie_min_gbps) r.threshold = {{"min", *opts.pcie_min_gbps}};
  nlohmann::json gpus = nlohmann::json::array();
  double worst = -1;
  for (int dev = 0; dev < devices; ++dev) {
    const DeviceInfo info = device_info(dev);
    const PcieOutcome o = measure_pcie(dev, opts);
    const std::string id = "GPU" + std::to_string(dev);
    nlohmann::json j = {{"index", dev}, {"name", info.name}, {"pci_bus_id", info.pci_bus_id}};
    if (!o.error.empty()) {
      j["error"] = o.error;
      agent::add_failure(r, id + ": " + o.error);
      gpus.push_back(std::move(j));
      continue;
    }
    j["host_to_device_gbps"] = o.h2d_gbps;
    j["device_to_host_gbps"] = o.d2h_gbps;
    gpus.push_back(std::move(j));
    const double low = std::min(o.h2d_gbps, o.d2h_gbps);
    worst = worst < 0 ? low : std::min(worst, low);
    if (opts.pcie_min_gbps && low < *opts.pcie_min_gbps) {
      char b[200];
      std::snprintf(b, sizeof b, "%s: host->device %.1f GB/s, device->host %.1f GB/s, expected at least %.1f GB/s",
                    id.c_str(), o.h2d_gbps, o.d2h_gbps, *opts.pcie_min_gbps);
      agent::add_failure(r, b);
    }
  }
  r.details["gpus"] = gpus;
  r.details["method"] = "pinned host buffer of " + std::to_string(opts.pcie_mib) +
                        " MiB, cudaMemcpyAsync each way, best of " + std::to_string(opts.iterations);
  if (worst >= 0) r.value = worst;
  return r;
}

}  // namespace kiln::gpucheck
