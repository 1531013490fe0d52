#pragma once
// The node's platform facts: CPU, memory, NUMA, DMI, hypervisor, boot mode
// and GPUs, each read from files under a root prefix (see host_path) so a test
// points the collector at a tree it wrote. Each returns the JSON fragment
// schemas/inventory.schema.json describes; a missing file is an absent or
// null value, never an error (a VM has no DMI serial, a ramdisk may lack NVML).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::agent {

// <root>/proc/cpuinfo: {"model", "vendor", "sockets", "cores", "threads", "flags": [...]}.
// Only flags a scheduler or operator matches on are kept (avx512f, amx_tile, ...).
nlohmann::json collect_cpu(const std::string& root);

// <root>/proc/meminfo MemTotal, plus the installed DIMM total from the SMBIOS
// table (<root>/sys/firmware/dmi/tables/DMI) when it is readable:
// {"total_bytes", "physical_bytes" | null, "dimms" | null}.
nlohmann::json collect_memory(const std::string& root);

// Sum of installed memory devices (SMBIOS type 17) in a raw DMI table, and
// their count; nullopt when the table has no memory devices.
struct DimmTotal {
  std::uint64_t bytes = 0;
  unsigned count = 0;
};
std::optional<DimmTotal> smbios_memory_total(std::string_view table);

// <root>/sys/devices/system/node/node*: [{"node", "cpulist", "memory_bytes"}].
nlohmann::json collect_numa(const std::string& root);

// <root>/sys/class/dmi/id: {"sys_vendor", "product_name", "product_serial",
// "product_uuid", "board_vendor", "board_name", "board_serial", "bios_vendor",
// "bios_version", "chassis_type"}; unreadable entries are null.
nlohmann::json collect_dmi(const std::string& root);

// {"virtual": bool, "vendor": "kvm" | "vmware" | ... | null, "evidence": ["cpuid", ...]}.
// `probe_cpuid` executes CPUID on the running CPU (only meaningful when root
// is the host).
nlohmann::json collect_hypervisor(const std::string& root, const nlohmann::json& dmi, bool probe_cpuid);

// "uefi" when <root>/sys/firmware/efi exists, else "bios".
std::string collect_boot_mode(const std::string& root);

// NVIDIA GPU PCI functions under <root>/sys/bus/pci/devices, each with model,
// memory and uuid from NVML when `nvml_library` loads (else null):
// [{"pci_address", "vendor_id", "device_id", "class", "numa_node", "model", "memory_bytes", "uuid"}].
nlohmann::json collect_gpus(const std::string& root, const std::string& nvml_library);

}  // namespace kiln::agent
