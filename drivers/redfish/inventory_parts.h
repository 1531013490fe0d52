#pragma once
// The parts of a Redfish inventory, from single resources: pure functions,
// no I/O, never throw (tests/fuzz/targets/redfish_parts.cc feeds them any
// JSON). Every property is read through Props, so a null or wrongly typed
// value is absent and becomes a warning (props.h).
//
// Entries carry `source` (what kind of resource they came from) and
// `redfish_uri` / `found_at` (which ones), so an operator can see where a
// figure came from when it disagrees with the profile.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::redfish {

// ---- PCIe classification ---------------------------------------------------

enum class PcieClass { kGpu, kDpu, kNic, kStorage, kOther };
const char* to_string(PcieClass c);

// One PCIeFunction, as far as classification needs it.
struct PcieFunctionInfo {
  std::string device_class;  // DeviceClass: DisplayController, NetworkController, ...
  std::string vendor_id;     // as the BMC wrote it: "0x10de", "0x10DE", "4318" (HPE: decimal)
  std::string device_id;
};
PcieFunctionInfo pcie_function(const nlohmann::json& function, const std::string& uri,
                               std::vector<std::string>& warnings);

// A PCI id as a number: "0x10de" and "10DE" are hexadecimal, a string of
// decimal digits only is decimal (HPE's iLO writes "4318"), else nullopt.
std::optional<uint32_t> parse_pci_id(std::string_view id);
// NVIDIA's PCI vendor id (0x10de).
bool is_nvidia_vendor(std::string_view id);

// Classifies a PCIe device:
//  * GPU: a function of class DisplayController / ProcessingAccelerators (3D
//    controllers are display class) whose vendor is NVIDIA; when the BMC does
//    not know the vendor (missing, 0x0000, 0xffff: Supermicro writes 0x0000),
//    the device's own Manufacturer/Model/Name must name NVIDIA or a GPU. A
//    display function of another vendor (the BMC's own VGA: ASPEED, Matrox)
//    is not a GPU. HGX baseboards give their GPUs' functions no DeviceClass:
//    an NVIDIA function without one is a GPU when the device says "GPU" (the
//    NVSwitches beside them do not).
//  * DPU: a BlueField (by name or model, or Mellanox device ids a2d2/a2d6/a2dc).
//  * NIC / storage: NetworkController / MassStorageController.
//  * With no readable functions, the device's Id/Name/Description decide.
PcieClass classify_pcie(const nlohmann::json& device, const std::vector<PcieFunctionInfo>& functions);

// True when a name or model says BlueField / DPU.
bool looks_like_dpu(std::string_view text);

// ---- Entries ------------------------------------------------------------------

// {id, model, cores, threads, arch, redfish_uri}
nlohmann::json cpu_entry(const nlohmann::json& processor, const std::string& uri,
                         std::vector<std::string>& warnings);
// {name, id, mac, speed_mbps, link, source: "ethernet_interface", redfish_uri};
// null when the interface has no MAC (lower-case, colon separated).
nlohmann::json nic_entry(const nlohmann::json& ethernet_interface, const std::string& uri,
                         std::vector<std::string>& warnings);
// {name, model, serial, size_bytes, rotational, protocol, redfish_uri}
nlohmann::json drive_entry(const nlohmann::json& drive, const std::string& uri,
                           std::vector<std::string>& warnings);
// {id, name, model, manufacturer, serial, firmware, class, vendor_id, device_id, redfish_uri}
nlohmann::json pcie_entry(const nlohmann::json& device, const std::string& uri, PcieClass c,
                          const std::vector<PcieFunctionInfo>& functions,
                          std::vector<std::string>& warnings);
// A network adapter: {id, name, model, manufacturer, serial, firmware, macs,
// dpu, source: "network_adapter", redfish_uri}. `macs` come from its
// NetworkDeviceFunctions and Ports (macs_of()).
nlohmann::json adapter_entry(const nlohmann::json& adapter, const std::string& uri,
                             const std::vector<std::string>& macs, std::vector<std::string>& warnings);
// The MAC addresses a NetworkDeviceFunction or Port names (Ethernet.MACAddress,
// Ethernet.PermanentMACAddress, Ethernet.AssociatedMACAddresses,
// AssociatedNetworkAddresses), normalised; all-zero ones are left out.
std::vector<std::string> macs_of(const nlohmann::json& function_or_port, const std::string& uri,
                                 std::vector<std::string>& warnings);
// "AA-BB-CC-DD-EE-FF" / "aabb.ccdd.eeff" / "AABBCCDDEEFF" -> "aa:bb:cc:dd:ee:ff";
// "" when it is not a 48-bit MAC or is all zero.
std::string normalise_mac(std::string_view mac);

// ---- GPUs -----------------------------------------------------------------------

// One place a GPU was seen. The same physical GPU is often seen two or three
// times: as a Processor of a GPU baseboard system, as that board's PCIe
// device, and as a display controller on the host's PCIe bus.
struct GpuSighting {
  std::string source;  // "processor" | "pcie"
  std::string uri;     // the resource it was read from
  std::string id, name, model, vendor, serial, uuid, firmware, part_number;
  std::optional<int64_t> memory_mib;
  std::string pcie_device;  // processor: Links.PCIeDevice; pcie: its own URI
  std::string chassis;      // processor: Links.Chassis; pcie: the chassis listing it
};
// From a Processor whose ProcessorType is GPU. `memory_mib` is what its
// Links.Memory resources add up to (nullopt when there are none); the
// processor's MemorySummary.TotalMemorySizeMiB wins when present.
GpuSighting gpu_from_processor(const nlohmann::json& processor, const std::string& uri,
                               std::optional<int64_t> memory_mib, std::vector<std::string>& warnings);
// From a PCIe device classified kGpu, listed by `chassis` ("" when it came
// from a system's PCIeDevices links).
GpuSighting gpu_from_pcie(const nlohmann::json& device, const std::string& uri, const std::string& chassis,
                          const std::vector<PcieFunctionInfo>& functions, std::vector<std::string>& warnings);

// One entry per physical GPU. Sightings are the same GPU when they share a
// serial number, a UUID, a PCIe device, or a chassis that holds only one GPU
// of each source (HGX_GPU_SXM_n); merged entries take each field from the
// first sighting that has it, processors first. PCIe sightings with no serial
// or UUID that matched nothing (the host's view of baseboard GPUs) cannot be
// told apart: they are counted only beyond the GPUs identified otherwise, with
// a warning. Entry: {name, model, vendor, serial, uuid, firmware, part_number,
// memory_mib, source, sources, found_at}.
nlohmann::json merge_gpus(const std::vector<GpuSighting>& sightings, std::vector<std::string>& warnings);

// {"cpus", "cpu_cores", "gpus", "gpu_models": {model: n}, "dpus", "nics",
//  "network_adapters", "disks", "pcie_devices", "memory_mib"} of an inventory.
nlohmann::json count_parts(const nlohmann::json& inventory);

}  // namespace kiln::redfish

namespace kiln::redfish {

// ---- Systems and DPUs -----------------------------------------------------------

// True when a system's Id or Name says it is not the host: a GPU baseboard
// (HGX_Baseboard_0, UBB), a DPU / BlueField, or an ERoT.
bool looks_like_baseboard(const nlohmann::json& system);

// What a ComputerSystem other than the host is to the machine (inventory.h).
enum class SystemRole { kGpuBaseboard, kDpu, kOtherHost };
const char* to_string(SystemRole r);
SystemRole classify_system(const nlohmann::json& system);

// A DPU entry {name, model, serial, firmware, macs, source, found_at} from a
// DPU's own ComputerSystem, a PCIe device, or a network adapter entry.
nlohmann::json dpu_from_system(const nlohmann::json& system, const std::string& uri,
                               std::vector<std::string>& warnings);
nlohmann::json dpu_from_pcie(const nlohmann::json& pcie_entry);
nlohmann::json dpu_from_adapter(const nlohmann::json& adapter_entry);
// One entry per serial number (entries without one are kept as they are);
// merged entries join their macs and found_at.
nlohmann::json merge_dpus(const nlohmann::json& dpus);

}  // namespace kiln::redfish
