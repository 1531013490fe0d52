#include <algorithm>

#include "agent/gpucheck/cuda_device.h"
#include "agent/gpucheck/gpu_checks.h"
#include "agent/validate/checks/nvml.h"

namespace kiln::gpucheck {

agent::CheckResult check_nvlink(const GpucheckOptions& opts, int devices) {
  agent::CheckResult r;
  r.name = "nvlink";
  r.unit = "links";
  r.status = agent::CheckStatus::kPass;
  r.threshold = {{"min", opts.nvlink_links}};
  if (opts.expect_gpus > 0 && devices != opts.expect_gpus)
    agent::add_failure(r, "expected " + std::to_string(opts.expect_gpus) + " GPUs, found " + std::to_string(devices));

  // Peer access matrix in CUDA order (main.cc sets CUDA_DEVICE_ORDER=PCI_BUS_ID,
  // so it matches NVML's order).
  nlohmann::json matrix = nlohmann::json::array();
  int missing_pairs = 0;
  for (int a = 0; a < devices; ++a) {
    nlohmann::json row = nlohmann::json::array();
    for (int b = 0; b < devices; ++b) {
      if (a == b) {
        row.push_back(nullptr);
        continue;
      }
      int can = 0;
      if (cudaError_t e = cudaDeviceCanAccessPeer(&can, a, b); e != cudaSuccess) {
        agent::add_failure(r, cuda_error("cudaDeviceCanAccessPeer", e));
        can = 0;
      }
      row.push_back(can != 0);
      if (!can) ++missing_pairs;
    }
    matrix.push_back(std::move(row));
  }
  r.details["p2p_matrix"] = matrix;
  r.details["p2p_missing_pairs"] = missing_pairs;
  if (opts.nvlink_links > 0 && missing_pairs > 0)
    agent::add_failure(r, std::to_string(missing_pairs) + " GPU pairs cannot access each other's memory (P2P)");

  auto snap = agent::read_nvml(opts.nvml_library);
  if (!snap) {
    r.details["nvml"] = snap.error().message;
    if (opts.nvlink_links > 0) agent::add_failure(r, "NVLink state unknown: " + snap.error().message);
    return r;
  }
  nlohmann::json gpus = nlohmann::json::array();
  int fewest = -1;
  for (const auto& g : snap->devices) {
    const int up = g.nvlink_up.value_or(0);
    gpus.push_back({{"index", g.index}, {"name", g.name}, {"pci_bus_id", g.pci_bus_id}, {"links_up", up}});
    fewest = fewest < 0 ? up : std::min(fewest, up);
    if (opts.nvlink_links > 0 && up < opts.nvlink_links)
      agent::add_failure(r, "GPU" + std::to_string(g.index) + " has " + std::to_string(up) + " NVLink links up, expected " +
                                std::to_string(opts.nvlink_links));
  }
  r.details["gpus"] = gpus;
  if (fewest >= 0) r.value = fewest;
  return r;
}

}  // namespace kiln::gpucheck
