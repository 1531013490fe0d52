// Kiln's states as Ironic's clients see them: the whole table, written out
// independently of controller/ironic/ironic_states.cc, and the rules the
// clients' waits depend on (ironicclient's wait_for_provision_state and
// openstacksdk's _check_state_reached: a failure is "error" or "... failed";
// a null target_provision_state means "stable").
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <tuple>

#include "controller/ironic/ironic_states.h"

using namespace kiln;
using S = ProvisionState;

namespace {

struct Row {
  S state;
  std::string step;
  std::string provision_state;
  std::string target;  // "" = null
};

// (Kiln state, step) -> (Ironic provision_state, target_provision_state).
const Row kExpected[] = {
    {S::kEnroll, "", "enroll", ""},
    {S::kVerifying, "starting", "verifying", "manageable"},
    {S::kVerifying, "verify_bmc", "verifying", "manageable"},
    {S::kManageable, "", "manageable", ""},
    {S::kInspecting, "starting", "inspecting", "manageable"},
    {S::kInspecting, "power_on", "inspecting", "manageable"},
    {S::kInspecting, "wait_agent", "inspect wait", "manageable"},
    {S::kInspecting, "inspect", "inspect wait", "manageable"},
    {S::kInspectFailed, "", "inspect failed", "manageable"},
    {S::kCleaning, "starting", "cleaning", "available"},
    {S::kCleaning, "set_boot_pxe", "cleaning", "available"},
    {S::kCleaning, "power_on", "cleaning", "available"},
    {S::kCleaning, "wait_agent", "clean wait", "available"},
    {S::kCleaning, "wipe", "clean wait", "available"},
    {S::kBurningIn, "burn_in", "clean wait", "available"},
    {S::kBurningIn, "power_off", "cleaning", "available"},
    {S::kCleanFailed, "", "clean failed", "available"},
    {S::kQuarantined, "", "error", ""},
    {S::kAvailable, "", "available", ""},
    {S::kDeploying, "starting", "deploying", "active"},
    {S::kDeploying, "set_boot_pxe", "deploying", "active"},
    {S::kDeploying, "power_on", "deploying", "active"},
    {S::kDeploying, "wait_agent", "wait call-back", "active"},
    {S::kDeploying, "write_image", "wait call-back", "active"},
    {S::kDeploying, "write_config_drive", "wait call-back", "active"},
    {S::kDeploying, "set_boot_disk", "deploying", "active"},
    {S::kDeploying, "reboot", "deploying", "active"},
    {S::kDeploying, "wait_boot", "wait call-back", "active"},
    {S::kDeploying, "wait_phone_home", "wait call-back", "active"},
    {S::kValidating, "validate", "wait call-back", "active"},
    {S::kValidating, "validated_in_ramdisk", "deploying", "active"},
    {S::kDeployFailed, "", "deploy failed", "active"},
    {S::kActive, "", "active", ""},
};

Node node_in(S s, const std::string& step) {
  Node n;
  n.provision_state = s;
  n.provision_step = step;
  return n;
}

}  // namespace

TEST_CASE("every Kiln state and step under Ironic's names") {
  for (const Row& r : kExpected) {
    Node n = node_in(r.state, r.step);
    ironic::NodeStates got = ironic::node_states(n);
    INFO(std::string(to_string(r.state)) << " at " << r.step);
    CHECK(got.provision_state == r.provision_state);
    if (r.target.empty())
      CHECK_FALSE(got.target_provision_state.has_value());
    else
      CHECK(got.target_provision_state.value_or("(null)") == r.target);
    CHECK(ironic::shows_provision_state(n, r.provision_state));
    CHECK(ironic::is_provision_state_name(r.provision_state));
  }
}

TEST_CASE("the table has one row per Kiln state and every state is covered above") {
  std::set<S> rows;
  for (const ironic::StateRow& r : ironic::state_table()) CHECK(rows.insert(r.kiln).second);
  std::set<S> expected;
  for (const Row& r : kExpected) expected.insert(r.state);
  for (S s : kAllProvisionStates) {
    CHECK(rows.count(s) == 1);
    CHECK(expected.count(s) == 1);
  }
}

TEST_CASE("the target recorded when a verb is accepted is shown from the 202 on") {
  // The conductor writes the final target with the transition; a wait that
  // reads the node right after the 202 must see a non-null target.
  Node n = node_in(S::kCleaning, "starting");
  n.target_provision_state = S::kAvailable;
  CHECK(ironic::node_states(n).target_provision_state == std::optional<std::string>("available"));
  n = node_in(S::kVerifying, "starting");
  n.target_provision_state = S::kManageable;
  CHECK(ironic::node_states(n).target_provision_state == std::optional<std::string>("manageable"));
}

TEST_CASE("failure states are the ones the clients' waits stop on") {
  for (S s : kAllProvisionStates) {
    std::string name = ironic::node_states(node_in(s, "")).provision_state;
    bool client_failure = name == "error" || name.ends_with(" failed");
    INFO(to_string(s));
    CHECK(client_failure == is_failed(s));
  }
}

TEST_CASE("stable states have a null target, transient ones never do") {
  for (S s : kAllProvisionStates) {
    auto target = ironic::node_states(node_in(s, "starting")).target_provision_state;
    INFO(to_string(s));
    if (is_transient(s)) CHECK(target.has_value());
    if (!is_transient(s) && !is_failed(s)) CHECK_FALSE(target.has_value());
  }
}

TEST_CASE("power states and targets") {
  Node n;
  n.power_state = PowerState::kUnknown;
  CHECK_FALSE(ironic::node_states(n).power_state.has_value());
  n.power_state = PowerState::kOn;
  CHECK(ironic::node_states(n).power_state == std::optional<std::string>("power on"));
  n.power_state = PowerState::kOff;
  CHECK(ironic::node_states(n).power_state == std::optional<std::string>("power off"));
  CHECK_FALSE(ironic::node_states(n).target_power_state.has_value());
  n.target_power_state = PowerState::kOn;  // a reboot's target, as power_action_result gives it
  CHECK(ironic::node_states(n).target_power_state == std::optional<std::string>("power on"));
}

TEST_CASE("older microversions see older names") {
  CHECK_FALSE(ironic::versioned_provision_state("available", 1).has_value());
  CHECK(ironic::versioned_provision_state("available", 2) == std::optional<std::string>("available"));
  CHECK(ironic::versioned_provision_state("inspect wait", 38) == std::optional<std::string>("inspecting"));
  CHECK(ironic::versioned_provision_state("inspect wait", 39) == std::optional<std::string>("inspect wait"));
}

TEST_CASE("filter names: every state of Ironic's machine, nothing else") {
  for (const char* s : {"deleting", "rescue", "adopt failed", "unrescue failed", "clean wait"})
    CHECK(ironic::is_provision_state_name(s));
  for (const char* s : {"deleted", "burning_in", "quarantined", "deploy_failed", ""})
    CHECK_FALSE(ironic::is_provision_state_name(s));
}
