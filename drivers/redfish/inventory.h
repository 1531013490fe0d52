#pragma once
// Hardware inventory from Redfish, in Kiln's inventory JSON:
//
//   {"source": "redfish",
//    "system":   {"manufacturer", "product", "serial", "uuid", "sku", "redfish_uri"},
//    "firmware": {"bios", "bmc"},
//    "cpus":     {"count", "cores", "threads", "model", "items": [{id, model, cores, threads, arch}]},
//    "memory_mib": N,
//    "disks":    [{name, model, serial, size_bytes, rotational, protocol}],
//    "nics":     [{name, mac, speed_mbps, link}],      (MACs lowercase)
//    "gpus":     [{name, model, vendor, serial, firmware, source: "processor"|"pcie"}],
//    "pcie_devices": [{id, name, model, manufacturer, serial, firmware, class}],
//    "warnings": ["what could not be read and why"]}
//
// Where things live differs by vendor. CPUs are Processors with ProcessorType
// "CPU". GPUs are Processors with ProcessorType "GPU" on some BMCs (DMTF's
// tower, HGX systems), and only PCIeDevices on others (Supermicro lists its 8
// H100s under Chassis/1/PCIeDevices). PCIe devices come from the system's
// PCIeDevices links and from the PCIeDevices collections of the chassis the
// system links to. A device is a GPU when its Id/Name/Description says "GPU",
// else when a PCIeFunction's DeviceClass is DisplayController or
// ProcessingAccelerators. A GPU seen both as a Processor and a PCIe device
// (same serial number) is counted once. Drives come from Storage -> Drives
// and from SimpleStorage Devices. Sub-resources that fail with 404 or a BMC
// error are skipped with a warning; timeouts and auth failures end the call.

#include <optional>
#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/result.h"
#include "drivers/redfish/client.h"
#include "drivers/redfish/discovery.h"

namespace kiln::redfish {

enum class PcieClass { kGpu, kNic, kStorage, kOther };
const char* to_string(PcieClass c);

// Classifies from the device's own Id/Name/Description; nullopt when they
// say nothing recognisable (then functions decide).
std::optional<PcieClass> classify_pcie_by_name(const nlohmann::json& device);
// Classifies from the device's PCIeFunctions (DeviceClass).
PcieClass classify_pcie_by_functions(const std::vector<nlohmann::json>& functions);

// Entries of the inventory JSON from single resources.
nlohmann::json cpu_entry(const nlohmann::json& processor);
nlohmann::json gpu_from_processor(const nlohmann::json& processor);
nlohmann::json gpu_from_pcie(const nlohmann::json& device);
nlohmann::json nic_entry(const nlohmann::json& ethernet_interface);  // null when it has no MAC
nlohmann::json drive_entry(const nlohmann::json& drive);
nlohmann::json pcie_entry(const nlohmann::json& device, PcieClass c);

// Processor GPUs, plus PCIe GPUs whose serial number is not among them (PCIe
// GPUs without a serial are added only when no processor GPU exists).
nlohmann::json merge_gpus(const nlohmann::json& from_processors, const nlohmann::json& from_pcie);

// Reads the inventory of the host system `system`. Errors: kTimeout,
// kUnauthenticated, kUnavailable (the BMC went away); other failures of
// sub-resources become warnings.
asio::awaitable<Result<nlohmann::json>> collect_inventory(RedfishClient& client, HostSystem system,
                                                          Deadline deadline);

}  // namespace kiln::redfish
