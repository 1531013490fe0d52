#pragma once
// What a hypervisor host has, as discovery finds it: CPUs and NUMA cells,
// memory, hugepages, NVIDIA GPUs with their IOMMU groups and mdev types.
// Plain data: the libvirt driver fills it (drivers/libvirt/host_facts.h reads
// libvirt's XML into it), the controller books capacity against it
// (controller/model/host.h) and the store keeps it as JSON.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln {

struct NumaCell {
  int id = 0;
  int64_t memory_mib = 0;
  std::vector<int> cpus;          // host CPU ids
  int64_t hugepages_2m = 0;       // 2 MiB pages configured in this cell
  bool operator==(const NumaCell&) const = default;
};

struct HostGpu {
  std::string address;            // PCI address "0000:3b:00.0"
  std::string nodedev;            // libvirt node device name "pci_0000_3b_00_0"
  std::string product;            // product name or id as libvirt reports it
  int numa_node = -1;             // -1 when unknown
  int iommu_group = -1;
  std::vector<std::string> mdev_types;  // vGPU types offered (empty: passthrough only)
  bool operator==(const HostGpu&) const = default;
};

struct HostCapacity {
  std::string arch;               // x86_64, ...
  // Domain types the host offers for `arch` (from <guest><arch><domain type=.../>):
  // "kvm", "qemu", or the test driver's "test".
  std::vector<std::string> domain_types;
  std::string emulator;           // for `arch`
  std::vector<std::string> machines;  // machine types for `arch` (q35, pc, ...)
  int cpus = 0;
  int64_t memory_mib = 0;
  std::vector<NumaCell> cells;
  std::vector<HostGpu> gpus;
  bool operator==(const HostCapacity&) const = default;
};

// --- JSON (store columns, API documents) ---

inline void to_json(nlohmann::json& j, const NumaCell& c) {
  j = {{"id", c.id}, {"memory_mib", c.memory_mib}, {"cpus", c.cpus}, {"hugepages_2m", c.hugepages_2m}};
}
inline void from_json(const nlohmann::json& j, NumaCell& c) {
  c.id = j.value("id", 0);
  c.memory_mib = j.value("memory_mib", int64_t{0});
  c.cpus = j.value("cpus", std::vector<int>{});
  c.hugepages_2m = j.value("hugepages_2m", int64_t{0});
}
inline void to_json(nlohmann::json& j, const HostGpu& g) {
  j = {{"address", g.address},     {"nodedev", g.nodedev},         {"product", g.product},
       {"numa_node", g.numa_node}, {"iommu_group", g.iommu_group}, {"mdev_types", g.mdev_types}};
}
inline void from_json(const nlohmann::json& j, HostGpu& g) {
  g.address = j.value("address", "");
  g.nodedev = j.value("nodedev", "");
  g.product = j.value("product", "");
  g.numa_node = j.value("numa_node", -1);
  g.iommu_group = j.value("iommu_group", -1);
  g.mdev_types = j.value("mdev_types", std::vector<std::string>{});
}
inline void to_json(nlohmann::json& j, const HostCapacity& c) {
  j = {{"arch", c.arch},   {"domain_types", c.domain_types}, {"emulator", c.emulator},
       {"machines", c.machines}, {"cpus", c.cpus},           {"memory_mib", c.memory_mib},
       {"numa_cells", c.cells},  {"gpus", c.gpus}};
}
inline void from_json(const nlohmann::json& j, HostCapacity& c) {
  c.arch = j.value("arch", "");
  c.domain_types = j.value("domain_types", std::vector<std::string>{});
  c.emulator = j.value("emulator", "");
  c.machines = j.value("machines", std::vector<std::string>{});
  c.cpus = j.value("cpus", 0);
  c.memory_mib = j.value("memory_mib", int64_t{0});
  c.cells = j.value("numa_cells", std::vector<NumaCell>{});
  c.gpus = j.value("gpus", std::vector<HostGpu>{});
}

}  // namespace kiln
