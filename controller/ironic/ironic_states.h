#pragma once
// Kiln's node states under Ironic's names (ironic/common/states.py, Ironic
// 21.4), for the Ironic-compatible API.
//
// Kiln's engine (controller/model/state_machine.h) stays the only one that
// decides where a node may go; this file only says what an Ironic client
// sees of it, as one table. The clients act on these names:
// ironicclient's and openstacksdk's waits stop with a failure on any
// provision_state that is "error" or ends in " failed", succeed on the
// expected name, and fail on a stable state reached while
// target_provision_state is null. So:
//
//   * target_provision_state is non-null from the moment a verb is accepted
//     (the conductor writes Node::target_provision_state in the same write
//     that takes the node) until the node is in a stable state.
//   * Kiln's failed states are Ironic's ("deploy failed", ...), and
//     quarantined (a validation gate failed) is "error": a wait fails on
//     it and last_error says why.
//   * Kiln's burn-in is part of what Ironic calls cleaning (it runs between
//     cleaning and available), and its validating part of deploying.
//   * Ironic's wait states ("clean wait", "wait call-back", "inspect wait")
//     are shown while the current step's work happens on the node (the
//     agent, or the OS's cloud-init), the others while kilnd itself acts.
//   * A failed state shows the target Ironic's state machine gives it
//     (deploy failed -> active, clean failed -> available, inspect failed
//     -> manageable): Ironic's failed states are not stable.
//
// Pure functions of the Node record; any thread.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "controller/model/node.h"

namespace kiln::ironic {

// Ironic's provision state names that this API may show.
namespace state {
inline constexpr std::string_view kEnroll = "enroll";
inline constexpr std::string_view kVerifying = "verifying";
inline constexpr std::string_view kManageable = "manageable";
inline constexpr std::string_view kInspecting = "inspecting";
inline constexpr std::string_view kInspectWait = "inspect wait";
inline constexpr std::string_view kInspectFailed = "inspect failed";
inline constexpr std::string_view kCleaning = "cleaning";
inline constexpr std::string_view kCleanWait = "clean wait";
inline constexpr std::string_view kCleanFailed = "clean failed";
inline constexpr std::string_view kAvailable = "available";
inline constexpr std::string_view kDeploying = "deploying";
inline constexpr std::string_view kDeployWait = "wait call-back";
inline constexpr std::string_view kDeployFailed = "deploy failed";
inline constexpr std::string_view kActive = "active";
inline constexpr std::string_view kError = "error";
}  // namespace state

// Ironic's power state names.
namespace power {
inline constexpr std::string_view kOn = "power on";
inline constexpr std::string_view kOff = "power off";
inline constexpr std::string_view kRebooting = "rebooting";
inline constexpr std::string_view kSoftOff = "soft power off";
inline constexpr std::string_view kSoftRebooting = "soft rebooting";
}  // namespace power

// One row per Kiln provision state: its Ironic name while kilnd acts, while
// the node works (a wait step), and the target shown in a failed state.
struct StateRow {
  ProvisionState kiln;
  std::string_view acting;   // provision_state while kilnd itself acts
  std::string_view waiting;  // provision_state at a wait step (== acting when none)
  std::string_view failed_target;  // target_provision_state of a failed state ("" = null)
};

// The whole table, one row per ProvisionState (the unit test holds it to
// kAllProvisionStates).
std::span<const StateRow> state_table();

// Whether a node in `s` at `step` waits on the node itself (its agent, or
// the deployed OS phoning home) rather than on kilnd.
bool waits_on_node(ProvisionState s, std::string_view step);

// The Ironic provision_state of a node in `s` at `step`.
std::string_view provision_state_name(ProvisionState s, std::string_view step);

// The four state fields of a node as Ironic shows them (null = nullopt).
struct NodeStates {
  std::string provision_state;
  std::optional<std::string> target_provision_state;
  std::optional<std::string> power_state;         // null while unknown
  std::optional<std::string> target_power_state;  // null when no action runs
};

NodeStates node_states(const Node& n);

// Ironic's name of a Kiln power state: "power on", "power off", or nullopt
// (unknown, shown as null).
std::optional<std::string_view> power_state_name(PowerState p);

// `name` (a provision_state) as a client at microversion 1.`minor` sees it,
// as Ironic's update_state_in_older_versions: below 1.2 "available" is null
// (NOSTATE), below 1.39 "inspect wait" is "inspecting".
std::optional<std::string> versioned_provision_state(std::string_view name, int minor);

// Whether `name` is one of Ironic's provision state names (every name of
// ironic/common/states.py's machine, including those Kiln never shows,
// which then match no node): an unknown filter value is a 400 in Ironic.
bool is_provision_state_name(std::string_view name);

// Whether node `n` shows provision_state `name` (the list filter
// ?provision_state=).
bool shows_provision_state(const Node& n, std::string_view name);

}  // namespace kiln::ironic
