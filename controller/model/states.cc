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

std::string_view to_string(NodeKind k) { return k == NodeKind::kVirtual ? "virtual" : "baremetal"; }

std::optional<NodeKind> parse_node_kind(std::string_view s) {
  if (s == "baremetal") return NodeKind::kBaremetal;
  if (s == "virtual") return NodeKind::kVirtual;
  return std::nullopt;
}

}  // namespace kiln
