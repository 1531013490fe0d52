#include "agent/validate/checks/pcie_links.h"

#include <cstdio>

#include "agent/validate/checks/sysfs.h"

namespace kiln::agent {

CheckResult check_pcie_links(const ValidationProfile& profile, const std::string& sys_root) {
  CheckResult r;
  r.name = "pcie_links";
  r.unit = "degraded links";
  r.threshold = {{"max", 0}};
  r.status = CheckStatus::kPass;
  nlohmann::json devices = nlohmann::json::array();
  int judged = 0, degraded = 0, gpus = 0;
  for (const auto& d : list_pci_devices(sys_root)) {
    const bool gpu = is_nvidia_gpu(d);
    if (!gpu && !is_nic(d)) continue;
    if (gpu) ++gpus;
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%04x", d.vendor);
    nlohmann::json j = {{"address", d.address}, {"kind", gpu ? "gpu" : "nic"}, {"vendor", hex}};
    if (d.numa_node) j["numa_node"] = *d.numa_node;
    const auto cur = d.current_link_speed ? parse_link_speed_gts(*d.current_link_speed) : std::nullopt;
    const auto max = d.max_link_speed ? parse_link_speed_gts(*d.max_link_speed) : std::nullopt;
    const bool widths = d.current_link_width && d.max_link_width && *d.max_link_width > 0;
    if (!cur || !max || !widths) {
      j["link"] = "no link info";
      devices.push_back(std::move(j));
      continue;
    }
    ++judged;
    j["speed_gts"] = *cur;
    j["max_speed_gts"] = *max;
    j["generation"] = pcie_generation(*cur);
    j["max_generation"] = pcie_generation(*max);
    j["width"] = *d.current_link_width;
    j["max_width"] = *d.max_link_width;
    const std::string who = std::string(gpu ? "GPU " : "NIC ") + d.address;
    bool bad = false;
    if (*d.current_link_width < *d.max_link_width) {
      add_failure(r, who + " link is x" + std::to_string(*d.current_link_width) + ", capable of x" +
                         std::to_string(*d.max_link_width));
      bad = true;
    }
    if (*cur < *max * 0.99) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s link runs at %.1f GT/s, capable of %.1f GT/s", who.c_str(), *cur, *max);
      if (gpu && !profile.pcie_strict_gpu_speed) {
        add_warning(r, std::string(buf) + " (GPUs slow their link when idle)");
        j["speed_below_max"] = true;
      } else {
        add_failure(r, buf);
        bad = true;
      }
    }
    if (bad) ++degraded;
    j["degraded"] = bad;
    devices.push_back(std::move(j));
  }
  r.details["devices"] = devices;
  r.value = degraded;
  if (profile.gpu_count > 0 && gpus == 0)
    add_failure(r, "expected " + std::to_string(profile.gpu_count) + " GPUs, found 0 on the PCI bus");
  else if (judged == 0 && r.status == CheckStatus::kPass) {
    r.status = CheckStatus::kSkip;
    r.details["reason"] = "no GPU or NIC reports PCIe link attributes";
  }
  return r;
}

}  // namespace kiln::agent
