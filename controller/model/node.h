#pragma once
// The Node record and its parts, as the store keeps them and the API and
// conductor read them. Plain data: no I/O, no JSON policy (the API decides what
// each role sees; the store decides how it is laid out on disk).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/ssh_host_key.h"
#include "controller/model/states.h"
#include "controller/model/steps.h"
#include "drivers/bmc.h"  // BmcInfo: the drivers' vocabulary

namespace kiln {

struct Port {
  std::string id;       // UUID
  std::string node_id;  // owning node's UUID
  std::string address;  // MAC, lowercase colon-separated
  bool pxe = true;
  int64_t created_at = 0;
};

// Where a node's `addresses` came from. The OS-phase agent's report wins
// over DHCP: the agent lists every interface of the booted OS as the OS
// itself configured it (static addresses, other networks), while a DHCP
// lease says only what the provisioning network's server handed a MAC,
// which a cloud-init network-config may have replaced since. DHCP fills in
// for an OS that runs no agent (controller/boot/lease_addresses.h).
enum class AddressSource { kNone, kAgent, kDhcp };

inline const char* to_string(AddressSource s) {
  switch (s) {
    case AddressSource::kAgent: return "agent";
    case AddressSource::kDhcp: return "dhcp";
    case AddressSource::kNone: break;
  }
  return "";
}
// "" is kNone; nullopt for any other unknown text.
inline std::optional<AddressSource> parse_address_source(std::string_view s) {
  if (s.empty()) return AddressSource::kNone;
  if (s == "agent") return AddressSource::kAgent;
  if (s == "dhcp") return AddressSource::kDhcp;
  return std::nullopt;
}

struct Node {
  std::string id;    // UUID
  std::string name;  // unique when non-empty; never looks like a UUID
  NodeKind kind = NodeKind::kBaremetal;
  BmcInfo bmc;
  std::vector<Port> ports;  // filled by the store on reads
  std::string boot_mode = "uefi";  // uefi | bios
  std::string profile;
  std::vector<std::string> traits;

  ProvisionState provision_state = ProvisionState::kEnroll;
  std::optional<ProvisionState> target_provision_state;
  std::string provision_step;   // progress inside a transient state ("power_on", ...)
  int64_t deadline_at = 0;      // ms epoch when the current wait times out; 0 = none

  PowerState power_state = PowerState::kUnknown;
  std::optional<PowerState> target_power_state;

  bool maintenance = false;
  std::string maintenance_reason;
  std::string fault;            // "power_failure", ... set by periodic checks
  std::string last_error;

  std::string tenant;           // owner once handed over; empty = provider's
  std::string allocation;
  std::string host;             // hypervisor host (virtual nodes)
  nlohmann::json inventory;     // null until inspected
  std::string last_validation;  // report id
  std::string image;            // deploy: the image being (or last) deployed, id or name
  // The booted OS's IP addresses as its OS-phase agent last reported them
  // (AgentBroker::heartbeat), IPv4 first, and the login made of them:
  // "<the image's ssh_user>@<first address>". Both emptied when a new boot
  // attempt starts (AgentBroker::forget).
  // With no agent report, the DHCP leases of the node's ports while it is
  // active (LeaseAddressLearner). `address_source` says
  // which; kNone exactly when `addresses` is empty.
  std::vector<std::string> addresses;
  AddressSource address_source = AddressSource::kNone;
  std::string ssh;
  // The booted OS's SSH host public keys, as cloud-init's phone_home posted
  // them to the deploy's one-time URL (api/phone_home_routes.cc), each
  // parsed by common/ssh_host_key.h. Non-empty also means the deploy's
  // phone-home URL is used up. Emptied when a new boot attempt starts
  // (AgentBroker::forget).
  std::vector<SshHostKey> ssh_host_keys;

  // What the Ironic-compatible API (controller/ironic) keeps for this node
  // that Kiln has no field for: Ironic's driver name, non-secret driver_info
  // keys as written, properties, extra, instance_info, instance_uuid,
  // resource_class, description, ... An object; {} for a node nobody touched
  // through that API. Never holds a secret (passwords are sealed in bmc).
  // Kiln's own code never reads it.
  nlohmann::json ironic = nlohmann::json::object();

  // The lock: id of the operation holding the node, empty when free. At most
  // one operation runs per node; every change by an operation is conditional
  // on still holding it.
  std::string reservation;

  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t version = 0;  // bumped on every write; the ETag
};

// Whether `n` is in an on-demand validation that boots the deploy ramdisk
// (POST /v1/nodes/{id}/validations on an agent-driven node): it stays in its
// stable state (manageable, available or quarantined) while the run holds
// its reservation and records the steps of on_demand_flow()
// (controller/model/steps.h). The boot script and the agent broker treat
// those steps, up to its final power off, as a ramdisk wait.
inline bool on_demand_ramdisk(const Node& n) {
  const ProvisionState s = n.provision_state;
  if (n.reservation.empty()) return false;
  if (s != ProvisionState::kManageable && s != ProvisionState::kAvailable && s != ProvisionState::kQuarantined)
    return false;
  return on_demand_ramdisk_step(n.provision_step);
}

}  // namespace kiln
