#pragma once
// Network interfaces and RDMA devices from <root>/sys/class/net and
// <root>/sys/class/infiniband. An interface counts as physical when it has a
// `device` link (bridges, bonds, veth, tun and lo have none); only physical
// interfaces are inventoried and offered to kilnd as lookup MACs.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::agent {

struct NetInterface {
  std::string name;                     // "ens1f0np0"
  std::string mac;                      // lower-case "52:54:00:12:34:56"
  std::string driver;                   // "mlx5_core", "virtio_net"; "" when unbound
  std::optional<int> speed_mbps;        // nullopt when down or unknown (the kernel reports -1)
  bool carrier = false;
  std::optional<std::string> pci_address;
  int type = 1;                         // ARPHRD: 1 Ethernet, 32 InfiniBand
  std::optional<int> mtu;
};

// Physical interfaces, sorted by name.
std::vector<NetInterface> list_nics(const std::string& root);

// The MACs to send in /v1/agent/lookup: Ethernet-sized MACs of physical
// interfaces, de-duplicated, in interface order.
std::vector<std::string> lookup_macs(const std::string& root);

nlohmann::json to_json(const NetInterface& n);

// RDMA devices: [{"name", "pci_address", "node_guid", "fw_ver",
//   "ports": [{"port", "state", "phys_state", "rate", "rate_gbps", "link_layer"}]}]
nlohmann::json list_rdma_devices(const std::string& root);

}  // namespace kiln::agent
