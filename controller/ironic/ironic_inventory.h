#pragma once
// GET /v1/nodes/{node_ident}/inventory (Ironic 1.81) in ironic-python-agent's
// inventory shape, built from the inventory Kiln stored when it inspected the
// node (Node::inventory, the document /v1/nodes/{id}/inventory serves).
//
// Kiln stores one of two shapes: kiln-agent's (schemas/inventory.schema.json:
// cpu, memory, disks, nics, dmi, boot_mode, gpus, ...) and the BMC-read one
// of the redfish and fake drivers (drivers/redfish/inventory.h: system,
// cpus, memory_mib, disks, nics, gpus, ...). Both map onto
//
//   {"inventory": {"interfaces": [{name, mac_address, ipv4_address,
//                                  ipv6_address, has_carrier, lldp, vendor,
//                                  product, client_id, biosdevname, speed_mbps}],
//                  "cpu": {model_name, frequency, count, architecture, flags,
//                          socket_count},
//                  "memory": {total, physical_mb},
//                  "bmc_address", "bmc_v6address", "bmc_mac",
//                  "disks": [{name: "/dev/x", model, size, rotational, wwn,
//                             serial, vendor, wwn_with_extension,
//                             wwn_vendor_extension, hctl, by_path}],
//                  "system_vendor": {product_name, serial_number, manufacturer,
//                                    firmware: {vendor, version, build_date}},
//                  "boot": {current_boot_mode, pxe_interface},
//                  "hostname"},
//    "plugin_data": {what IPA's shape has no place for: gpus, rdma, numa,
//                    hypervisor, dpus, ... under their Kiln names, plus
//                    "source" (agent, redfish, fake)}}
//
// The stored document is the agent's or a BMC's word, so every member is
// read with its type checked: a missing or mistyped value is null (or an
// empty list), never a guess and never an exception. Lists are bounded
// (kMaxInventoryItems) so a hostile agent cannot make the reply unbounded
// beyond what /v1 already serves.
//
// Pure function; any thread.

#include <cstddef>

#include <nlohmann/json.hpp>

#include "controller/model/node.h"

namespace kiln::ironic {

inline constexpr std::size_t kMaxInventoryItems = 1024;

// The reply body for a node Kiln has inspected (node.inventory an object).
// The caller answers 404 when node.inventory is not an object.
nlohmann::json ironic_inventory(const Node& node);

}  // namespace kiln::ironic
