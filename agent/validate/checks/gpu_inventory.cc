#include "agent/validate/checks/gpu_inventory.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "agent/validate/checks/sysfs.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

namespace {

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

CheckResult check_gpu_inventory(const ValidationProfile& profile, const Result<NvmlSnapshot>& nvml,
                                const std::string& sys_root) {
  CheckResult r;
  r.name = "gpu_inventory";
  r.unit = "GPUs";
  r.threshold = {{"expected", profile.gpu_count}};
  r.status = CheckStatus::kPass;

  int pci_gpus = 0;
  nlohmann::json pci_list = nlohmann::json::array();
  for (const auto& d : list_pci_devices(sys_root)) {
    if (!is_nvidia_gpu(d)) continue;
    ++pci_gpus;
    pci_list.push_back(d.address);
  }
  r.details["pci_nvidia_gpus"] = pci_gpus;
  r.details["pci_addresses"] = pci_list;

  const int found = nvml ? static_cast<int>(nvml->devices.size()) : 0;
  r.value = found;
  if (!nvml) r.details["nvml"] = nvml.error().message;

  if (found == 0) {
    if (profile.gpu_count == 0) {
      r.status = CheckStatus::kSkip;
      r.details["reason"] = pci_gpus > 0 ? "profile expects no GPU (PCI lists " + plural(pci_gpus, "NVIDIA GPU") + ")"
                                         : std::string("profile expects no GPU and none was found");
      return r;
    }
    std::string why = "expected " + plural(profile.gpu_count, "GPU") + ", found 0";
    if (!nvml) why += ": " + nvml.error().message;
    if (pci_gpus > 0) why += " (PCI lists " + plural(pci_gpus, "NVIDIA GPU") + ": driver not usable)";
    add_failure(r, why);
    return r;
  }

  const NvmlSnapshot& snap = *nvml;
  r.details["driver_version"] = snap.driver_version;
  r.details["cuda_version"] = snap.cuda_version;
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : snap.devices) {
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"uuid", g.uuid},
                    {"pci_bus_id", g.pci_bus_id},
                    {"memory_gib", static_cast<double>(g.memory_total_bytes) / (1024.0 * 1024 * 1024)}});
  }
  r.details["gpus"] = gpus;

  if (found != profile.gpu_count)
    add_failure(r, "expected " + plural(profile.gpu_count, "GPU") + ", found " + std::to_string(found));
  if (pci_gpus > found)
    add_failure(r, "PCI lists " + plural(pci_gpus, "NVIDIA GPU") + " but NVML sees " + std::to_string(found));
  for (const auto& g : snap.devices) {
    const std::string id = "GPU" + std::to_string(g.index);
    if (!profile.gpu_model.empty() && scan::to_lower(g.name).find(scan::to_lower(profile.gpu_model)) == std::string::npos)
      add_failure(r, id + " is '" + g.name + "', expected model " + profile.gpu_model);
    const double gib = static_cast<double>(g.memory_total_bytes) / (1024.0 * 1024 * 1024);
    if (profile.gpu_memory_gib_min && gib < *profile.gpu_memory_gib_min) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "%s has %.1f GiB, expected at least %.1f GiB", id.c_str(), gib,
                    *profile.gpu_memory_gib_min);
      add_failure(r, buf);
    }
  }
  if (!profile.driver_min.empty()) {
    if (snap.driver_version.empty()) add_failure(r, "driver version unknown, expected >= " + profile.driver_min);
    else if (compare_versions(snap.driver_version, profile.driver_min) < 0)
      add_failure(r, "driver " + snap.driver_version + " is older than " + profile.driver_min);
  }
  if (!profile.cuda_min.empty()) {
    if (snap.cuda_version.empty()) add_failure(r, "CUDA version unknown, expected >= " + profile.cuda_min);
    else if (compare_versions(snap.cuda_version, profile.cuda_min) < 0)
      add_failure(r, "driver supports CUDA " + snap.cuda_version + ", expected >= " + profile.cuda_min);
  }
  return r;
}

}  // namespace kiln::agent
