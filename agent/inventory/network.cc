#include "agent/inventory/network.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "agent/inventory/block_devices.h"
#include "agent/validate/checks/sysfs.h"
#include "agent/validate/parsers/text_scan.h"

namespace kiln::agent {

namespace fs = std::filesystem;

namespace {

std::optional<int> read_int(const fs::path& p) {
  auto s = read_first_line(p);
  if (!s || s->empty()) return std::nullopt;
  try {
    return std::stoi(*s);
  } catch (...) {
    return std::nullopt;
  }
}

// "4: ACTIVE" -> "ACTIVE"; "5: LinkUp" -> "LinkUp".
std::string after_colon(const std::string& s) {
  const auto c = s.find(':');
  if (c == std::string::npos) return s;
  auto v = s.substr(c + 1);
  v.erase(0, v.find_first_not_of(' '));
  return v;
}

}  // namespace

std::vector<NetInterface> list_nics(const std::string& root) {
  std::vector<NetInterface> out;
  for (const auto& p : sorted_children(host_path(root, "/sys/class/net"))) {
    NetInterface n;
    n.name = p.filename().string();
    if (n.name == "lo") continue;
    std::error_code ec;
    if (!fs::exists(p / "device", ec)) continue;  // virtual: no backing device
    n.mac = scan::to_lower(read_first_line(p / "address").value_or(""));
    if (n.mac.empty()) continue;
    n.type = read_int(p / "type").value_or(1);
    n.mtu = read_int(p / "mtu");
    const fs::path driver = fs::read_symlink(p / "device/driver", ec);
    if (!ec) n.driver = driver.filename().string();
    if (auto speed = read_int(p / "speed"); speed && *speed > 0) n.speed_mbps = *speed;
    n.carrier = read_first_line(p / "carrier").value_or("0") == "1";
    n.pci_address = pci_address_of((p / "device").string());
    out.push_back(std::move(n));
  }
  return out;
}

std::vector<std::string> lookup_macs(const std::string& root) {
  std::vector<std::string> macs;
  for (const auto& n : list_nics(root)) {
    if (n.mac.size() != 17 || n.mac == "00:00:00:00:00:00") continue;
    if (std::find(macs.begin(), macs.end(), n.mac) == macs.end()) macs.push_back(n.mac);
  }
  return macs;
}

nlohmann::json to_json(const NetInterface& n) {
  return {{"name", n.name},
          {"mac", n.mac},
          {"driver", n.driver},
          {"speed_mbps", n.speed_mbps ? nlohmann::json(*n.speed_mbps) : nlohmann::json(nullptr)},
          {"carrier", n.carrier},
          {"pci_address", n.pci_address ? nlohmann::json(*n.pci_address) : nlohmann::json(nullptr)},
          {"link_type", n.type == 32 ? "infiniband" : n.type == 1 ? "ethernet" : "other"},
          {"mtu", n.mtu ? nlohmann::json(*n.mtu) : nlohmann::json(nullptr)}};
}

nlohmann::json list_rdma_devices(const std::string& root) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& dev : sorted_children(host_path(root, "/sys/class/infiniband"))) {
    nlohmann::json d;
    d["name"] = dev.filename().string();
    auto pci = pci_address_of((dev / "device").string());
    d["pci_address"] = pci ? nlohmann::json(*pci) : nlohmann::json(nullptr);
    d["node_guid"] = read_first_line(dev / "node_guid").value_or("");
    d["fw_ver"] = read_first_line(dev / "fw_ver").value_or("");
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& port : sorted_children(dev / "ports")) {
      nlohmann::json pj;
      int number = 0;
      try {
        number = std::stoi(port.filename().string());
      } catch (...) {
        continue;
      }
      pj["port"] = number;
      pj["state"] = after_colon(read_first_line(port / "state").value_or(""));
      pj["phys_state"] = after_colon(read_first_line(port / "phys_state").value_or(""));
      const std::string rate = read_first_line(port / "rate").value_or("");
      pj["rate"] = rate;
      try {
        pj["rate_gbps"] = rate.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::stod(rate));
      } catch (...) {
        pj["rate_gbps"] = nullptr;
      }
      pj["link_layer"] = read_first_line(port / "link_layer").value_or("");
      ports.push_back(std::move(pj));
    }
    d["ports"] = std::move(ports);
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace kiln::agent
