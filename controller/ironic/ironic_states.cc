#include "controller/ironic/ironic_states.h"

#include "controller/model/state_machine.h"
#include "controller/model/steps.h"

namespace kiln::ironic {
namespace {

using S = ProvisionState;
namespace st = state;

// Kiln state -> Ironic names. Burn-in is the tail of Ironic's cleaning
// (between cleaning and available); validating the tail of its deploying.
constexpr StateRow kRows[] = {
    {S::kEnroll, st::kEnroll, st::kEnroll, ""},
    {S::kVerifying, st::kVerifying, st::kVerifying, ""},
    {S::kManageable, st::kManageable, st::kManageable, ""},
    {S::kInspecting, st::kInspecting, st::kInspectWait, ""},
    {S::kInspectFailed, st::kInspectFailed, st::kInspectFailed, st::kManageable},
    {S::kCleaning, st::kCleaning, st::kCleanWait, ""},
    {S::kCleanFailed, st::kCleanFailed, st::kCleanFailed, st::kAvailable},
    {S::kBurningIn, st::kCleaning, st::kCleanWait, ""},
    // A validation gate failed: Ironic has no quarantine; "error" (stable,
    // last_error set) is what its clients treat as a failure to stop on.
    {S::kQuarantined, st::kError, st::kError, ""},
    {S::kAvailable, st::kAvailable, st::kAvailable, ""},
    {S::kDeploying, st::kDeploying, st::kDeployWait, ""},
    {S::kDeployFailed, st::kDeployFailed, st::kDeployFailed, st::kActive},
    {S::kValidating, st::kDeploying, st::kDeployWait, ""},
    {S::kActive, st::kActive, st::kActive, ""},
};

// Every state of Ironic 21.4's machine (states.machine.states): a list
// filter may name any of them.
constexpr std::string_view kIronicStates[] = {
    "enroll",        "verifying",    "manageable",  "available",      "active",       "error",
    "rescue",        "deploying",    "wait call-back", "deploy failed", "cleaning",   "clean wait",
    "clean failed",  "deleting",     "inspecting",  "inspect failed", "inspect wait", "adopting",
    "adopt failed",  "rescuing",     "rescue wait", "rescue failed",  "unrescuing",   "unrescue failed",
};

const StateRow& row(ProvisionState s) {
  for (const StateRow& r : kRows)
    if (r.kiln == s) return r;
  return kRows[0];  // not reached: the test holds the table to every state
}

}  // namespace

std::span<const StateRow> state_table() { return kRows; }

bool waits_on_node(ProvisionState s, std::string_view step) {
  if (!is_transient(s)) return false;
  // Work done by the node's agent (booting into it, wiping, writing,
  // validating) is Ironic's wait on its ramdisk; so is waiting for the
  // deployed OS's cloud-init to phone home.
  if (step == step_info(StepId::kWaitPhoneHome).name) return true;
  return agent_awaited(s, step) != AgentIn::kNone;
}

std::string_view provision_state_name(ProvisionState s, std::string_view step) {
  const StateRow& r = row(s);
  return waits_on_node(s, step) ? r.waiting : r.acting;
}

std::optional<std::string_view> power_state_name(PowerState p) {
  switch (p) {
    case PowerState::kOn: return power::kOn;
    case PowerState::kOff: return power::kOff;
    case PowerState::kUnknown: break;
  }
  return std::nullopt;
}

NodeStates node_states(const Node& n) {
  NodeStates out;
  out.provision_state = std::string(provision_state_name(n.provision_state, n.provision_step));
  if (is_transient(n.provision_state)) {
    // Written with the transition by the conductor; final_target() covers a
    // record that lacks it (a state entered before the field existed).
    ProvisionState target = n.target_provision_state.value_or(final_target(n.provision_state));
    out.target_provision_state = std::string(row(target).acting);
  } else if (!row(n.provision_state).failed_target.empty()) {
    out.target_provision_state = std::string(row(n.provision_state).failed_target);
  }
  if (auto p = power_state_name(n.power_state)) out.power_state = std::string(*p);
  if (n.target_power_state) {
    if (auto p = power_state_name(*n.target_power_state)) out.target_power_state = std::string(*p);
  }
  return out;
}

std::optional<std::string> versioned_provision_state(std::string_view name, int minor) {
  if (minor < 2 && name == state::kAvailable) return std::nullopt;
  if (minor < 39 && name == state::kInspectWait) return std::string(state::kInspecting);
  return std::string(name);
}

bool is_provision_state_name(std::string_view name) {
  for (std::string_view s : kIronicStates)
    if (s == name) return true;
  return false;
}

bool shows_provision_state(const Node& n, std::string_view name) {
  return provision_state_name(n.provision_state, n.provision_step) == name;
}

}  // namespace kiln::ironic
