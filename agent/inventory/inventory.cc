#include "agent/inventory/inventory.h"

#include "agent/inventory/block_devices.h"
#include "agent/inventory/network.h"
#include "agent/inventory/platform.h"
#include "agent/validate/checks/sysfs.h"

namespace kiln::agent {

nlohmann::json collect_inventory(const InventoryOptions& options) {
  const std::string& root = options.root;
  nlohmann::json inv;
  inv["schema_version"] = 1;
  inv["agent_version"] = options.agent_version;
  inv["kernel"] = read_first_line(host_path(root, "/proc/sys/kernel/osrelease")).value_or("");
  inv["cpu"] = collect_cpu(root);
  inv["memory"] = collect_memory(root);
  inv["numa"] = collect_numa(root);
  nlohmann::json disks = nlohmann::json::array();
  for (const auto& d : list_disks(root)) disks.push_back(to_json(d));
  inv["disks"] = std::move(disks);
  nlohmann::json nics = nlohmann::json::array();
  for (const auto& n : list_nics(root)) nics.push_back(to_json(n));
  inv["nics"] = std::move(nics);
  inv["rdma"] = list_rdma_devices(root);
  inv["gpus"] = collect_gpus(root, options.nvml_library);
  inv["dmi"] = collect_dmi(root);
  inv["hypervisor"] = collect_hypervisor(root, inv["dmi"], options.probe_cpuid);
  inv["boot_mode"] = collect_boot_mode(root);
  return inv;
}

}  // namespace kiln::agent
