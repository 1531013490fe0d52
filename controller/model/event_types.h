#pragma once
// Every event type Kiln records, in one list: the store writes them, the API
// streams them (GET /v1/events, the SSE stream), the CLI, the portal and
// dnsmasq's supervisor filter on them. A new type is added here and nowhere
// else; code names the constant, never the string. The names are character
// arrays so they pass where a std::string or a std::string_view is wanted.
//
// Shape: "<subject>.<what happened>", lowercase with underscores.

#include <array>
#include <string_view>

namespace kiln::event_type {

// A node's record.
inline constexpr char kNodeCreated[] = "node.created";
inline constexpr char kNodeUpdated[] = "node.updated";
inline constexpr char kNodeDeleted[] = "node.deleted";
inline constexpr char kNodeMaintenanceSet[] = "node.maintenance_set";
inline constexpr char kNodeMaintenanceCleared[] = "node.maintenance_cleared";
inline constexpr char kNodeFault[] = "node.fault";
inline constexpr char kNodeFaultCleared[] = "node.fault_cleared";
inline constexpr char kNodeClaimed[] = "node.claimed";    // an allocation took it
inline constexpr char kNodeReleased[] = "node.released";  // an allocation let it go
inline constexpr char kNodeAddresses[] = "node.addresses";
inline constexpr char kNodeSshHostKeys[] = "node.ssh_host_keys";
inline constexpr char kNodeAgentInputRefused[] = "node.agent_input_refused";
// Its ports.
inline constexpr char kPortCreated[] = "port.created";
inline constexpr char kPortDeleted[] = "port.deleted";
// Provisioning.
inline constexpr char kProvisionTransition[] = "provision.transition";
inline constexpr char kProvisionStep[] = "provision.step";
inline constexpr char kProvisionResumed[] = "provision.resumed";
// Power.
inline constexpr char kPowerRequested[] = "power.requested";
inline constexpr char kPowerTransition[] = "power.transition";
inline constexpr char kPowerFailed[] = "power.failed";
inline constexpr char kPowerDrift[] = "power.drift";
// Validation.
inline constexpr char kValidationRequested[] = "validation.requested";
inline constexpr char kValidationRecorded[] = "validation.recorded";
// The on-node agent.
inline constexpr char kAgentLookup[] = "agent.lookup";
inline constexpr char kAgentOsBooted[] = "agent.os_booted";
inline constexpr char kAgentCommandSent[] = "agent.command_sent";
inline constexpr char kAgentResult[] = "agent.result";
// Allocations.
inline constexpr char kAllocationCreated[] = "allocation.created";
inline constexpr char kAllocationTransition[] = "allocation.transition";
inline constexpr char kAllocationMemberReplaced[] = "allocation.member_replaced";
inline constexpr char kAllocationLease[] = "allocation.lease";

inline constexpr std::array<std::string_view, 31> kAll = {
    kNodeCreated,         kNodeUpdated,           kNodeDeleted,
    kNodeMaintenanceSet,  kNodeMaintenanceCleared, kNodeFault,
    kNodeFaultCleared,    kNodeClaimed,           kNodeReleased,
    kNodeAddresses,       kNodeSshHostKeys,       kNodeAgentInputRefused,
    kPortCreated,         kPortDeleted,           kProvisionTransition,
    kProvisionStep,       kProvisionResumed,      kPowerRequested,
    kPowerTransition,     kPowerFailed,           kPowerDrift,
    kValidationRequested, kValidationRecorded,    kAgentLookup,
    kAgentOsBooted,       kAgentCommandSent,      kAgentResult,
    kAllocationCreated,   kAllocationTransition,  kAllocationMemberReplaced,
    kAllocationLease,
};

// Whether `type` is one of kAll.
constexpr bool is_known(std::string_view type) {
  for (std::string_view t : kAll)
    if (t == type) return true;
  return false;
}

}  // namespace kiln::event_type
