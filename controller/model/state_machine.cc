#include "controller/model/state_machine.h"

#include <cassert>

namespace kiln {
namespace {

using S = ProvisionState;
using E = ProvisionEvent;

constexpr Transition kTransitions[] = {
    // Enrollment and verification of the BMC.
    {S::kEnroll, E::kManage, S::kVerifying},
    {S::kVerifying, E::kDone, S::kManageable},
    {S::kVerifying, E::kFail, S::kEnroll},
    {S::kVerifying, E::kAbort, S::kEnroll},

    // Inspection.
    {S::kManageable, E::kInspect, S::kInspecting},
    {S::kInspecting, E::kDone, S::kManageable},
    {S::kInspecting, E::kFail, S::kInspectFailed},
    {S::kInspecting, E::kAbort, S::kInspectFailed},

    // Providing: clean, then burn-in validation, then into the pool.
    {S::kManageable, E::kProvide, S::kCleaning},
    {S::kCleaning, E::kDone, S::kBurningIn},
    {S::kCleaning, E::kFail, S::kCleanFailed},
    {S::kCleaning, E::kAbort, S::kCleanFailed},
    {S::kBurningIn, E::kDone, S::kAvailable},
    {S::kBurningIn, E::kFail, S::kQuarantined},
    {S::kBurningIn, E::kAbort, S::kCleanFailed},

    // Deployment, then the quick validation that gates hand-off.
    {S::kAvailable, E::kDeploy, S::kDeploying},
    {S::kDeploying, E::kDone, S::kValidating},
    {S::kDeploying, E::kFail, S::kDeployFailed},
    {S::kDeploying, E::kAbort, S::kDeployFailed},
    {S::kValidating, E::kDone, S::kActive},
    {S::kValidating, E::kFail, S::kQuarantined},
    {S::kValidating, E::kAbort, S::kDeployFailed},

    // Tear-down goes through cleaning so the next tenant gets a wiped node.
    {S::kActive, E::kUndeploy, S::kCleaning},
    {S::kDeployFailed, E::kUndeploy, S::kCleaning},

    // Back to manageable: from the pool, and out of every failed state.
    {S::kAvailable, E::kManage, S::kManageable},
    {S::kInspectFailed, E::kManage, S::kManageable},
    {S::kCleanFailed, E::kManage, S::kManageable},
    {S::kDeployFailed, E::kManage, S::kManageable},
    {S::kQuarantined, E::kManage, S::kManageable},
};

constexpr TransientInfo kTransient[] = {
    // The BMC check is short and driven entirely by kilnd: re-run it by hand.
    {S::kVerifying, RestartPolicy::kFail},
    // Out-of-band inspection is driven by kilnd; in-band needs a fresh boot anyway.
    {S::kInspecting, RestartPolicy::kFail},
    // Wait states: the node's agent keeps working and calling back across a restart.
    {S::kCleaning, RestartPolicy::kResume},
    {S::kBurningIn, RestartPolicy::kResume},
    {S::kDeploying, RestartPolicy::kResume},
    {S::kValidating, RestartPolicy::kResume},
};

}  // namespace

std::string_view to_string(ProvisionEvent e) {
  switch (e) {
    case E::kManage: return "manage";
    case E::kInspect: return "inspect";
    case E::kProvide: return "provide";
    case E::kDeploy: return "deploy";
    case E::kUndeploy: return "undeploy";
    case E::kAbort: return "abort";
    case E::kDone: return "done";
    case E::kFail: return "fail";
  }
  return "?";
}

std::optional<ProvisionEvent> parse_provision_verb(std::string_view s) {
  for (E e : {E::kManage, E::kInspect, E::kProvide, E::kDeploy, E::kUndeploy, E::kAbort})
    if (to_string(e) == s) return e;
  return std::nullopt;
}

std::span<const Transition> transition_table() { return kTransitions; }

std::optional<ProvisionState> next_state(ProvisionState from, ProvisionEvent event) {
  for (const Transition& t : kTransitions)
    if (t.from == from && t.event == event) return t.to;
  return std::nullopt;
}

std::vector<ProvisionEvent> allowed_verbs(ProvisionState s) {
  std::vector<ProvisionEvent> out;
  for (const Transition& t : kTransitions)
    if (t.from == s && t.event != E::kDone && t.event != E::kFail) out.push_back(t.event);
  return out;
}

ProvisionState failed_state(ProvisionState s) {
  assert(is_transient(s));
  std::optional<ProvisionState> to = next_state(s, E::kFail);
  assert(to.has_value() && "every transient state has a fail row");
  return to.value_or(s);
}

ProvisionState final_target(ProvisionState first) {
  ProvisionState s = first;
  // Each done row moves forward; the table has no done cycle (the model
  // tests check), and the bound keeps a broken table from looping.
  for (int hops = 0; is_transient(s) && hops < 16; ++hops) {
    std::optional<ProvisionState> next = next_state(s, E::kDone);
    if (!next) break;
    s = *next;
  }
  return s;
}

const TransientInfo& transient_info(ProvisionState s) {
  for (const TransientInfo& i : kTransient)
    if (i.state == s) return i;
  assert(false && "transient_info on a stable state");
  return kTransient[0];
}

}  // namespace kiln
