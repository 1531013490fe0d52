#include "controller/model/states.h"

namespace kiln {

std::string_view to_string(ProvisionState s) {
  switch (s) {
    case ProvisionState::kEnroll: return "enroll";
    case ProvisionState::kVerifying: return "verifying";
    case ProvisionState::kManageable: return "manageable";
    case ProvisionState::kInspecting: return "inspecting";
    case ProvisionState::kInspectFailed: return "inspect_failed";
    case ProvisionState::kCleaning: return "cleaning";
    case ProvisionState::kCleanFailed: return "clean_failed";
    case ProvisionState::kBurningIn: return "burning_in";
    case ProvisionState::kQuarantined: return "quarantined";
    case ProvisionState::kAvailable: return "available";
    case ProvisionState::kDeploying: return "deploying";
    case ProvisionState::kDeployFailed: return "deploy_failed";
    case ProvisionState::kValidating: return "validating";
    case ProvisionState::kActive: return "active";
  }
  return "?";
}

std::optional<ProvisionState> parse_provision_state(std::string_view s) {
  for (ProvisionState p : kAllProvisionStates)
    if (to_string(p) == s) return p;
  return std::nullopt;
}

bool is_transient(ProvisionState s) {
  switch (s) {
    case ProvisionState::kVerifying:
    case ProvisionState::kInspecting:
    case ProvisionState::kCleaning:
    case ProvisionState::kBurningIn:
    case ProvisionState::kDeploying:
    case ProvisionState::kValidating:
      return true;
    default:
      return false;
  }
}

bool is_failed(ProvisionState s) {
  return s == ProvisionState::kInspectFailed || s == ProvisionState::kCleanFailed ||
         s == ProvisionState::kDeployFailed || s == ProvisionState::kQuarantined;
}

std::string_view to_string(PowerState s) {
  switch (s) {
    case PowerState::kOn: return "on";
    case PowerState::kOff: return "off";
    case PowerState::kUnknown: return "unknown";
  }
  return "unknown";
}

std::optional<PowerState> parse_power_state(std::string_view s) {
  if (s == "on") return PowerState::kOn;
  if (s == "off") return PowerState::kOff;
  if (s == "unknown") return PowerState::kUnknown;
  return std::nullopt;
}

std::string_view to_string(PowerAction a) {
  switch (a) {
    case PowerAction::kOn: return "on";
    case PowerAction::kOff: return "off";
    case PowerAction::kReboot: return "reboot";
    case PowerAction::kSoftOff: return "soft_off";
  }
  return "?";
}

std::optional<PowerAction> parse_power_action(std::string_view s) {
  if (s == "on") return PowerAction::kOn;
  if (s == "off") return PowerAction::kOff;
  if (s == "reboot") return PowerAction::kReboot;
  if (s == "soft_off") return PowerAction::kSoftOff;
  return std::nullopt;
}

PowerState power_action_result(PowerAction a) {
  return (a == PowerAction::kOff || a == PowerAction::kSoftOff) ? PowerState::kOff : PowerState::kOn;
}

std::string_view to_string(NodeKind k) { return k == NodeKind::kVirtual ? "virtual" : "baremetal"; }

std::optional<NodeKind> parse_node_kind(std::string_view s) {
  if (s == "baremetal") return NodeKind::kBaremetal;
  if (s == "virtual") return NodeKind::kVirtual;
  return std::nullopt;
}

}  // namespace kiln
