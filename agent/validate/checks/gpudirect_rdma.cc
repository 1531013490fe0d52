#include "agent/validate/checks/gpudirect_rdma.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace kiln::agent {

namespace fs = std::filesystem;

CheckResult check_gpudirect_rdma(const ValidationProfile& profile, const HostPaths& paths) {
  CheckResult r;
  r.name = "gpudirect_rdma";
  r.unit = "active ports";
  r.threshold = {{"min", profile.rdma_ports}};
  if (profile.rdma_rate_gbps) r.threshold["rate_gbps"] = *profile.rdma_rate_gbps;
  r.status = CheckStatus::kPass;

  std::error_code ec;
  const bool peermem = fs::exists(fs::path(paths.sys) / "module/nvidia_peermem", ec);
  const auto version = read_first_line(fs::path(paths.proc) / "driver/nvidia/version");
  const bool open_module = version && version->find("Open Kernel Module") != std::string::npos;
  r.details["nvidia_peermem"] = peermem;
  r.details["nvidia_open_module"] = open_module;
  r.details["gpu_memory_registration"] = peermem ? "nvidia_peermem" : open_module ? "dma-buf" : "none";

  nlohmann::json ports = nlohmann::json::array();
  int good = 0, active = 0;
  for (const auto& dev : sorted_children(fs::path(paths.sys) / "class/infiniband")) {
    for (const auto& port : sorted_children(dev / "ports")) {
      const std::string state = read_first_line(port / "state").value_or("");
      const std::string rate = read_first_line(port / "rate").value_or("");
      const std::string layer = read_first_line(port / "link_layer").value_or("");
      char* end = nullptr;
      const double gbps = std::strtod(rate.c_str(), &end);
      const bool is_active = state.find("ACTIVE") != std::string::npos;
      const bool fast = !profile.rdma_rate_gbps || (end != rate.c_str() && gbps >= *profile.rdma_rate_gbps * 0.99);
      const std::string who = dev.filename().string() + "/" + port.filename().string();
      ports.push_back({{"port", who}, {"state", state}, {"rate", rate}, {"rate_gbps", gbps},
                       {"link_layer", layer}, {"ok", is_active && fast}});
      if (is_active) ++active;
      if (is_active && fast) ++good;
      if (profile.rdma_ports == 0) continue;
      if (!is_active) {
        add_failure(r, who + " is " + (state.empty() ? "in an unknown state" : state));
      } else if (!fast) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "%s runs at %s, expected %.0f Gb/s", who.c_str(), rate.c_str(),
                      *profile.rdma_rate_gbps);
        add_failure(r, buf);
      }
    }
  }
  r.details["ports"] = ports;
  r.details["active_ports"] = active;
  r.value = good;

  if (profile.rdma_ports == 0) {
    r.status = CheckStatus::kSkip;
    r.details["reason"] = "profile expects no RDMA port";
    return r;
  }
  if (ports.empty()) {
    add_failure(r, "expected " + std::to_string(profile.rdma_ports) + " RDMA ports, found no RDMA device");
  } else if (good < profile.rdma_ports) {
    add_failure(r, "expected " + std::to_string(profile.rdma_ports) + " ACTIVE RDMA ports at the expected rate, found " +
                       std::to_string(good));
  } else if (r.status == CheckStatus::kFail && good >= profile.rdma_ports) {
    // Spare ports down beyond the expected count are worth showing, not failing.
    auto reasons = r.details["reasons"];
    r.details.erase("reasons");
    r.details.erase("reason");
    r.status = CheckStatus::kPass;
    for (const auto& w : reasons) add_warning(r, w.get<std::string>());
  }
  if (profile.gpu_count > 0 && profile.rdma_require_peermem && !peermem && !open_module)
    add_failure(r, "GPU memory cannot be registered with the NIC: nvidia_peermem not loaded and the NVIDIA open "
                   "kernel module (dma-buf) not in use");
  return r;
}

}  // namespace kiln::agent
