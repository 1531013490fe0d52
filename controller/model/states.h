#pragma once
// Provision and power state names, and the sets they fall into.
//
// Like Ironic's common/states.py this file holds only names and sets; the
// transitions between them live in state_machine.h as a table. Power states
// and verbs are the drivers' vocabulary (drivers/power.h), included here for
// the Node record and the API.
//
// Names use underscores so they can be used unquoted in query strings
// (`?provision_state=deploy_failed`).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/power.h"  // PowerState, PowerAction: the drivers' vocabulary

namespace kiln {

enum class ProvisionState {
  kEnroll,
  kVerifying,      // transient: checking the BMC
  kManageable,
  kInspecting,     // transient
  kInspectFailed,
  kCleaning,       // transient (wait state: the agent calls back)
  kCleanFailed,
  kBurningIn,      // transient (wait state): full validation plan after cleaning
  kQuarantined,    // validation failed: out of the pool until an operator acts
  kAvailable,
  kDeploying,      // transient (wait state)
  kDeployFailed,
  kValidating,     // transient (wait state): quick validation before hand-off
  kActive,
};

inline constexpr ProvisionState kAllProvisionStates[] = {
    ProvisionState::kEnroll,      ProvisionState::kVerifying,    ProvisionState::kManageable,
    ProvisionState::kInspecting,  ProvisionState::kInspectFailed, ProvisionState::kCleaning,
    ProvisionState::kCleanFailed, ProvisionState::kBurningIn,    ProvisionState::kQuarantined,
    ProvisionState::kAvailable,   ProvisionState::kDeploying,    ProvisionState::kDeployFailed,
    ProvisionState::kValidating,  ProvisionState::kActive,
};

std::string_view to_string(ProvisionState s);
std::optional<ProvisionState> parse_provision_state(std::string_view s);

// Transient states are ones a running operation holds a node in. Every one has a
// timeout and a failed state (see state_machine.h).
bool is_transient(ProvisionState s);
// Failed states: reached only by a failure or an abort; an operator acts next.
bool is_failed(ProvisionState s);

// Node kinds.
enum class NodeKind { kBaremetal, kVirtual };
std::string_view to_string(NodeKind k);
std::optional<NodeKind> parse_node_kind(std::string_view s);

}  // namespace kiln
