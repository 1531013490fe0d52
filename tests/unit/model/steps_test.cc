// The step and flow tables (controller/model/steps.h): their shape, and the
// answers the boot script and the agent broker read from them.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "controller/model/state_machine.h"
#include "controller/model/steps.h"

using namespace kiln;
using S = ProvisionState;
using K = StepId;

namespace {

std::string names(const Flow& f) {
  std::string out;
  for (const FlowStep& s : f.steps) out += (out.empty() ? "" : " ") + std::string(step_info(s.id).name);
  return out;
}

}  // namespace

TEST_CASE("every step id has its own row with a name") {
  for (int i = 0; i <= static_cast<int>(K::kNoInBandValidation); ++i) {
    const StepInfo& s = step_info(static_cast<K>(i));
    CHECK(static_cast<int>(s.id) == i);
    CHECK_FALSE(s.name.empty());
    CHECK(s.name != kStartingStep);
    // A step that needs something says what, for "driver X cannot ...".
    if (s.needs != kNeedNothing) CHECK_FALSE(s.cannot.empty());
  }
}

TEST_CASE("every transient state has an out-of-band flow, and every flow runs in a transient state") {
  for (S s : kAllProvisionStates) {
    INFO(to_string(s));
    if (is_transient(s)) {
      CHECK(find_flow(s, FlowKind::kOutOfBand) != nullptr);
    } else {
      CHECK(find_flow(s, FlowKind::kOutOfBand) == nullptr);
      CHECK(find_flow(s, FlowKind::kAgent) == nullptr);
      CHECK(find_flow(s, FlowKind::kVirtual) == nullptr);
    }
  }
  CHECK(find_flow(S::kVerifying, FlowKind::kAgent) == nullptr);  // the BMC check is out of band for all
}

TEST_CASE("flows list their steps in the documented order") {
  CHECK(names(*find_flow(S::kDeploying, FlowKind::kAgent)) ==
        "set_boot_pxe power_on wait_agent write_image write_config_drive set_boot_disk reboot wait_boot");
  CHECK(names(*find_flow(S::kCleaning, FlowKind::kAgent)) == "set_boot_pxe power_on wait_agent wipe");
  CHECK(names(*find_flow(S::kInspecting, FlowKind::kAgent)) == "set_boot_pxe power_on wait_agent inspect power_off");
  CHECK(names(*find_flow(S::kCleaning, FlowKind::kOutOfBand)) == "set_boot_pxe power_on clean power_off");
  CHECK(names(*find_flow(S::kDeploying, FlowKind::kVirtual)) == "define_domain wait_boot");
  CHECK(names(on_demand_flow()) == "set_boot_pxe power_on wait_agent validate");
  REQUIRE(on_demand_flow().finally.has_value());
  CHECK(step_info(*on_demand_flow().finally).name == "power_off");
}

TEST_CASE("agent and virtual flows resume at the recorded step, out-of-band flows start over") {
  CHECK(find_flow(S::kDeploying, FlowKind::kAgent)->resumable);
  CHECK(find_flow(S::kDeploying, FlowKind::kVirtual)->resumable);
  CHECK_FALSE(find_flow(S::kDeploying, FlowKind::kOutOfBand)->resumable);
  const Flow& f = *find_flow(S::kDeploying, FlowKind::kAgent);
  CHECK(step_index(f, "wait_boot") == 7);
  CHECK(step_index(f, "write_config_drive") == 4);
  CHECK(step_index(f, "set_boot_pxe") == 0);
  CHECK_FALSE(step_index(f, kStartingStep).has_value());
  CHECK_FALSE(step_index(f, "teardown").has_value());
}

TEST_CASE("what a node boots comes from its state's agent flow") {
  CHECK(boots_into(S::kDeploying, kStartingStep) == BootsInto::kRamdisk);
  CHECK(boots_into(S::kDeploying, "write_image") == BootsInto::kRamdisk);
  CHECK(boots_into(S::kDeploying, "write_config_drive") == BootsInto::kRamdisk);
  CHECK(boots_into(S::kDeploying, "set_boot_disk") == BootsInto::kDisk);
  CHECK(boots_into(S::kDeploying, "reboot") == BootsInto::kDisk);
  CHECK(boots_into(S::kDeploying, "wait_boot") == BootsInto::kDisk);
  // power_off changes nothing: the inspection's ramdisk is still what boots.
  CHECK(boots_into(S::kInspecting, "power_off") == BootsInto::kRamdisk);
  CHECK(boots_into(S::kBurningIn, "power_off") == BootsInto::kRamdisk);
  CHECK(boots_into(S::kCleaning, kStartingStep) == BootsInto::kRamdisk);
  CHECK(boots_into(S::kValidating, kStartingStep) == BootsInto::kDisk);
  CHECK(boots_into(S::kVerifying, kStartingStep) == BootsInto::kNone);
  CHECK(boots_into(S::kActive, "") == BootsInto::kNone);
}

TEST_CASE("the OS's agent is awaited only at wait_boot and in validating") {
  CHECK(agent_awaited(S::kDeploying, "wait_boot") == AgentIn::kOs);
  CHECK(agent_awaited(S::kDeploying, "reboot") == AgentIn::kNone);
  CHECK(agent_awaited(S::kDeploying, "wait_agent") == AgentIn::kRamdisk);
  CHECK(agent_awaited(S::kValidating, kStartingStep) == AgentIn::kOs);
  CHECK(agent_awaited(S::kValidating, "validate") == AgentIn::kOs);
  CHECK(agent_awaited(S::kAvailable, "") == AgentIn::kNone);
}

TEST_CASE("on-demand ramdisk steps are the flow's, not its final power off") {
  for (const char* s : {"set_boot_pxe", "power_on", "wait_agent", "validate"}) CHECK(on_demand_ramdisk_step(s));
  CHECK_FALSE(on_demand_ramdisk_step("power_off"));
  CHECK_FALSE(on_demand_ramdisk_step(""));
  CHECK_FALSE(on_demand_ramdisk_step("wait_boot"));
}

TEST_CASE("an image without kiln-agent deploys by its own flows, validated in the ramdisk before the write") {
  const Flow* agent = find_flow(S::kDeploying, FlowKind::kAgent, false);
  REQUIRE(agent != nullptr);
  CHECK(names(*agent) ==
        "set_boot_pxe power_on wait_agent validate write_image write_config_drive set_boot_disk reboot wait_phone_home");
  CHECK(agent->resumable);
  // The pre-write validation is the gate's quick plan, run by the ramdisk's agent.
  const StepInfo& v = step_info(agent->steps[*step_index(*agent, "validate")].id);
  CHECK(v.id == K::kValidateInRamdisk);
  CHECK(v.agent == AgentIn::kRamdisk);
  CHECK(v.boots == BootsInto::kRamdisk);
  CHECK(*step_index(*agent, "validate") < *step_index(*agent, "write_image"));
  CHECK(names(*find_flow(S::kValidating, FlowKind::kAgent, false)) == "validated_in_ramdisk");
  CHECK(names(*find_flow(S::kDeploying, FlowKind::kVirtual, false)) == "define_domain wait_phone_home");
  CHECK(names(*find_flow(S::kValidating, FlowKind::kVirtual, false)) == "no_in_band_validation");
  // Images with an agent keep theirs; a virtual node's validating falls back to the agent's.
  CHECK(find_flow(S::kDeploying, FlowKind::kAgent, true) == find_flow(S::kDeploying, FlowKind::kAgent));
  CHECK(names(*find_flow(S::kDeploying, FlowKind::kAgent, true)) ==
        "set_boot_pxe power_on wait_agent write_image write_config_drive set_boot_disk reboot wait_boot");
  CHECK(find_flow(S::kValidating, FlowKind::kVirtual, true) == nullptr);
  // States that never reach the OS have one flow for every image.
  for (S s : {S::kCleaning, S::kInspecting, S::kBurningIn})
    CHECK(find_flow(s, FlowKind::kAgent, false) == find_flow(s, FlowKind::kAgent, true));
}

TEST_CASE("flows of one state for either kind of image share a step name only for the same work") {
  // boots_into and agent_awaited read a node's (state, step) without its
  // image: a name both flows use must mean the same boot and the same agent.
  for (S s : kAllProvisionStates) {
    for (FlowKind k : {FlowKind::kAgent, FlowKind::kVirtual}) {
      const Flow* with = find_flow(s, k, true);
      const Flow* without = find_flow(s, k, false);
      if (with == nullptr || without == nullptr || with == without) continue;
      for (const FlowStep& a : with->steps)
        for (const FlowStep& b : without->steps) {
          const StepInfo& x = step_info(a.id);
          const StepInfo& y = step_info(b.id);
          if (x.name != y.name) continue;
          INFO(to_string(s) << " " << x.name);
          CHECK(x.agent == y.agent);
          CHECK(x.boots == y.boots);
        }
    }
  }
}

TEST_CASE("a node waiting for the phone-home boots its disk and no agent is awaited") {
  CHECK(boots_into(S::kDeploying, "validate") == BootsInto::kRamdisk);
  CHECK(agent_awaited(S::kDeploying, "validate") == AgentIn::kRamdisk);
  CHECK(boots_into(S::kDeploying, "wait_phone_home") == BootsInto::kDisk);
  CHECK(agent_awaited(S::kDeploying, "wait_phone_home") == AgentIn::kNone);
  CHECK(boots_into(S::kValidating, "validated_in_ramdisk") == BootsInto::kDisk);
  CHECK(agent_awaited(S::kValidating, "validated_in_ramdisk") == AgentIn::kNone);
  // The OS-agent flow's answers are unchanged.
  CHECK(agent_awaited(S::kValidating, "validate") == AgentIn::kOs);
  CHECK(agent_awaited(S::kDeploying, "wait_boot") == AgentIn::kOs);
}

TEST_CASE("a deploy that times out waiting for the phone-home says what to check") {
  CHECK(late_step_reason(S::kDeploying, "wait_phone_home", "6s") ==
        "the OS did not phone home within 6s: is cloud-init's phone_home enabled in the image?");
  CHECK(late_step_reason(S::kDeploying, "wait_agent", "6s").empty());
  CHECK(late_step_reason(S::kDeploying, "wait_boot", "6s").empty());
  CHECK(late_step_reason(S::kCleaning, "wait_phone_home", "6s").empty());
}
