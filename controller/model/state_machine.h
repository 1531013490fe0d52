#pragma once
// The provision state machine, as data.
//
// Every transition a node can take is one row of kTransitions: (from, event,
// to). Events are either operator verbs (manage, inspect, provide, deploy,
// undeploy, abort) sent through the API, or outcomes (done, fail) reported by
// the operation that holds the node in a transient state. Nothing else in Kiln
// decides where a node may go: the API asks next_state() to accept or refuse a
// verb (409 naming the state), and the conductor asks it where an outcome leads.
//
//   enroll --manage--> verifying --done--> manageable        (fail: enroll)
//   manageable --inspect--> inspecting --done--> manageable  (fail: inspect_failed)
//   manageable --provide--> cleaning --done--> burning_in --done--> available
//                       (fail: clean_failed; burn-in validation fail: quarantined)
//   available --deploy--> deploying --done--> validating --done--> active
//                       (fail: deploy_failed; validation fail: quarantined)
//   active | deploy_failed --undeploy--> cleaning
//   failed states, available --manage--> manageable
//   every transient state --abort--> the failed state of the verb that
//   started it: verifying enroll, inspecting inspect_failed, cleaning and
//   burning_in clean_failed, deploying and validating deploy_failed (an
//   abort proves nothing about the hardware, so it never quarantines)
//
// The rows answer every other question too: failed_state() is a transient
// state's fail row (also where a timeout, a crashed operation or a restart
// that cannot resume leads), final_target() follows done rows to the stable
// state a verb ends in when everything succeeds.
//
// Each transient state also says what kilnd does with a node found in it at
// start-up (RestartPolicy): wait states, where the real work happens on the
// node and the agent keeps calling back, are resumed; the others are failed
// with a reason, because the operation that drove them died with the process.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "controller/model/states.h"

namespace kiln {

enum class ProvisionEvent {
  kManage, kInspect, kProvide, kDeploy, kUndeploy, kAbort,  // verbs
  kDone, kFail,                                             // outcomes
};

std::string_view to_string(ProvisionEvent e);
// Parses an operator verb; outcomes (done, fail) are not verbs and return nullopt.
std::optional<ProvisionEvent> parse_provision_verb(std::string_view s);

struct Transition {
  ProvisionState from;
  ProvisionEvent event;
  ProvisionState to;
};

// The whole table.
std::span<const Transition> transition_table();

// Where `event` takes a node in `from`, or nullopt when the table has no such row.
std::optional<ProvisionState> next_state(ProvisionState from, ProvisionEvent event);

// The verbs accepted in `s`, in table order (for 409 messages and the portal).
std::vector<ProvisionEvent> allowed_verbs(ProvisionState s);

enum class RestartPolicy { kResume, kFail };

// Where a transient state's fail row leads (also used for timeouts, crashed
// operations and restarts that cannot resume). Asserts `is_transient(s)`.
ProvisionState failed_state(ProvisionState s);

// The stable state reached from `first` by done rows: where a verb whose
// first step is `first` ends when everything succeeds (`first` itself when
// it is stable). Shown as target_provision_state.
ProvisionState final_target(ProvisionState first);

// Facts about one transient state that are not transitions.
struct TransientInfo {
  ProvisionState state;
  RestartPolicy on_restart;
};

// Info for a transient state; asserts `is_transient(s)`.
const TransientInfo& transient_info(ProvisionState s);

}  // namespace kiln
