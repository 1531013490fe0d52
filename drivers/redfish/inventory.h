#pragma once
// Hardware inventory from Redfish, in Kiln's inventory JSON:
//
//   {"source": "redfish",
//    "system":   {"manufacturer", "product", "serial", "uuid", "sku", "redfish_uri"},
//    "firmware": {"bios", "bmc"},
//    "cpus":     {"count", "cores", "threads", "model", "items": [{id, model, cores, threads, arch, redfish_uri}]},
//    "memory_mib": N,
//    "disks":    [{name, model, serial, size_bytes, rotational, protocol, redfish_uri}],
//    "nics":     [{name, id, mac, speed_mbps, link, source, redfish_uri}],  (one per MAC, lower case)
//    "network_adapters": [{id, name, model, manufacturer, serial, firmware, macs, dpu, source, redfish_uri}],
//    "gpus":     [{name, model, vendor, serial, uuid, firmware, part_number, memory_mib,
//                  source: "processor"|"pcie", sources, found_at}],
//    "dpus":     [{name, model, serial, firmware, macs, source, found_at}],
//    "pcie_devices": [{id, name, model, manufacturer, serial, firmware, class, vendor_id, device_id, redfish_uri}],
//    "systems":  [{redfish_uri, role: "host"|"gpu_baseboard"|"dpu"|"other_host"}],
//    "counts":   count_parts() of the above,
//    "warnings": ["what could not be read and why"]}
//
// Which resources belong to the machine. A BMC serves one machine, but lists
// several ComputerSystems: the host, GPU baseboards (NVIDIA HGX/DGX, GB200
// and GH200 trays expose theirs as HGX_Baseboard_0), DPUs. The candidates are
// the members of the service's Systems collection plus every system a
// chassis names in Links.ComputerSystems. Each is classified from its own
// resource: a DPU (SystemType "DPU", or a BlueField by name or model) is
// listed under `dpus` and never searched for host parts; a system that looks
// like another host (a Boot object, and neither a baseboard's nor a DPU's
// name: multi-node enclosures) is left out with a warning; the rest are the
// host's GPU baseboards. The machine's chassis are those the host and its
// baseboards link to, and those whose Links.ComputerSystems name them.
//
// Where each part is read:
//  * CPUs, DIMMs, drives, Ethernet interfaces: the host system only (a GB200
//    baseboard lists the host's Grace CPUs again).
//  * GPUs: Processors of type GPU of the host and every baseboard (memory from
//    MemorySummary or the processor's Links.Memory), and PCIe devices of the
//    host, the baseboards and the machine's chassis classified as GPUs
//    (inventory_parts.h: NVIDIA display/3D functions) — merged by merge_gpus.
//  * NICs and DPUs: the host's EthernetInterfaces, the machine chassis'
//    NetworkAdapters (MACs from NetworkDeviceFunctions and Ports), PCIe
//    network functions, DPU systems.
//
// Failures: a member of a collection (or a linked resource) that answers 4xx
// or 5xx, or is not a JSON object, is skipped with a warning naming it, and so
// is a property that is null or wrongly typed (props.h). Only a deadline, a
// transport failure or rejected credentials end the call.

#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/result.h"
#include "drivers/redfish/client.h"
#include "drivers/redfish/discovery.h"
#include "drivers/redfish/inventory_parts.h"

namespace kiln::redfish {

// Reads the inventory of the machine whose host system is `system`. Errors:
// kTimeout, kUnauthenticated, kUnavailable; everything else is a warning.
asio::awaitable<Result<nlohmann::json>> collect_inventory(RedfishClient& client, HostSystem system,
                                                          Deadline deadline);

}  // namespace kiln::redfish
