#pragma once
// Steps and flows, as data (ARCHITECTURE.md "Provisioning: states, steps and
// flows are data").
//
// A step is one thing the conductor does to a node inside a transient state:
// set the boot device, power on, wait for the agent, write the image. Its row
// says what it is called (the node's provision_step while it runs), what the
// node's driver must offer for it, which agent it talks to, and what the node
// boots into meanwhile (the boot script and the agent broker read that).
//
// A flow is the ordered steps of one transient state for one kind of node:
//
//   out_of_band  drivers that do the work themselves (fake): kilnd runs
//                every step, and a restart starts the flow again from the top
//   agent        drivers with kiln-agent (redfish, ipmi): the node boots the
//                deploy ramdisk or its OS and the agent does the in-band work;
//                a restart resumes at the recorded step
//   virtual      virtual nodes: deploy defines a domain, cleaning tears it down
//
// Deploying and validating also depend on the image: one whose OS runs
// kiln-agent (Image::os_agent) is validated through that agent after it
// boots (wait_boot, then validate in the OS), as above. A distro cloud
// image runs no kiln-agent, so its flows differ, as data (ImageAgent):
// bare metal validates in the deploy ramdisk *before* the image is written
// (the same quick plan through the same gate), then writes, and waits for
// the OS's cloud-init phone_home (wait_phone_home) instead of its agent;
// validating then only notes where the node was validated. A virtual node
// has no ramdisk stage: it waits for the phone-home and its validating
// state notes that nothing was measured in band. Where a state has a flow
// per kind of image the two share step names only for the same work (a
// test holds them to it), so a node's (state, step) alone still says what
// it boots and which agent it waits for.
//
// plus the on-demand validation of a node at rest (a ramdisk boot that
// changes no state). The executor (controller/conductor/workflow.cc) runs a
// flow: it checks every step's needs once up front, records each step on the
// node, skips the steps a resumed flow already did, and stops at the first
// failure. Step names are written here and nowhere else in product code
// (kiln-agent's command names are the agent protocol's, a different list).
//
// Pure data and lookups: no I/O, any thread.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "controller/model/states.h"

namespace kiln {

// provision_step of a node that entered a transient state and has not begun
// its first step yet.
inline constexpr std::string_view kStartingStep = "starting";

// What the node's driver must offer (a bit set).
enum Need : uint16_t {
  kNeedNothing = 0,
  kNeedPower = 1 << 0,       // PowerInterface
  kNeedManagement = 1 << 1,  // ManagementInterface (boot device, BMC check)
  kNeedInspect = 1 << 2,
  kNeedClean = 1 << 3,
  kNeedDeploy = 1 << 4,
  kNeedValidate = 1 << 5,    // only when the node names a profile (without one the step is a note)
  kNeedAgent = 1 << 6,       // AgentInterface (kiln-agent)
  kNeedPort = 1 << 7,        // a port on the node: a booting agent finds its node by MAC
};

// The agent a step talks to or waits for.
enum class AgentIn : uint8_t { kNone, kRamdisk, kOs };

// What the node boots into while the step runs (what its iPXE script says).
enum class BootsInto : uint8_t { kNone, kRamdisk, kDisk };

// What the executor does. Two ids may share a name when the same progress
// label means different work in different flows (power_on reboots a node
// that is on in agent flows; the fake driver's flows keep a plain power on).
enum class StepId : uint8_t {
  kVerifyBmc,
  kReadPower,        // optional in its flow: skipped without a PowerInterface
  kInspect,
  kSetBootPxe,       // PXE for the next boot
  kBootRamdisk,      // forget the node's last agent, then PXE for the next boot
  kPowerOn,
  kPowerOnOrReboot,  // a node already on (an OS, an old ramdisk) is rebooted
  kPowerOff,
  kReboot,
  kWaitAgent,        // the ramdisk's agent looks up
  kClean,            // the driver's clean (fake)
  kWipe,             // the agent's wipe
  kBurnIn,           // validation plan "full" through the gate
  kWriteImage,
  kWriteConfigDrive, // the allocation's keys and user data, in a cidata partition after the image
  kSetBootDisk,      // persistent
  kWaitBoot,         // the OS's agent looks up
  kValidate,         // validation plan "quick" through the gate
  kDefineDomain,     // virtual: place, define and start the domain
  kTeardown,         // virtual: domain, volume, port and capacity go
  kSkipBurnIn,       // virtual: nothing to burn in, a note says why
  kValidateOnce,     // on demand: one report, no gate, no state change
  kValidateInRamdisk,   // plan "quick" through the gate, in the deploy ramdisk before the write
  kWaitPhoneHome,       // the deployed OS's cloud-init posts to the deploy's phone-home URL
  kValidatedInRamdisk,  // validating, image without agent: a note naming the pre-write report
  kNoInBandValidation,  // validating, virtual, image without agent: a note that nothing was measured
};

struct StepInfo {
  StepId id;
  std::string_view name;  // provision_step while it runs
  uint16_t needs;         // Need bits
  std::string_view cannot;  // "driver X cannot <this>" when a need is missing
  AgentIn agent;
  BootsInto boots;
  // A wait whose deadline has a likelier cause than slowness: the node's
  // last_error when the state times out at this step, "{}" standing for the
  // state's timeout ("" = the generic "timed out after ..." message).
  std::string_view late = {};
};

const StepInfo& step_info(StepId id);

enum class FlowKind : uint8_t { kOutOfBand, kAgent, kVirtual, kOnDemand };

struct FlowStep {
  StepId id;
  bool optional = false;  // skipped (not failed) when the driver lacks what it needs
};

// Which images a flow is for: most flows never reach the OS and serve every
// image; deploying and validating have one flow per answer to "does the
// image's OS run kiln-agent" (Image::os_agent).
enum class ImageAgent : uint8_t { kAny, kRuns, kNone };

struct Flow {
  ProvisionState state;  // the transient state it runs in; for kOnDemand the
                         // state does not change and this is unused
  FlowKind kind;
  bool resumable;        // after a restart: continue at the recorded step (else from the top)
  std::span<const FlowStep> steps;
  std::optional<StepId> finally;  // run whatever happened (on demand: power off)
  ImageAgent image_agent = ImageAgent::kAny;
};

// The flow of `state` for `kind` and an image whose OS runs kiln-agent
// (`os_agent`) or not, or null when that kind has none of its own (the
// caller falls back: virtual -> agent -> out_of_band).
const Flow* find_flow(ProvisionState state, FlowKind kind, bool os_agent = true);

// The on-demand validation of an agent-driven node at rest.
const Flow& on_demand_flow();

// Index of the step called `name` in `flow`, if it has one.
std::optional<size_t> step_index(const Flow& flow, std::string_view name);

// Where a node in `state` at step `step` boots from: what its agent flow's
// step says (the flow of either kind of image that has the step: they agree
// on shared names), the ramdisk before the first step. kNone for states
// without an agent flow of their own. (Agent-driven nodes are the ones that
// PXE-boot.)
BootsInto boots_into(ProvisionState state, std::string_view step);

// The agent that `state` at `step` waits for: kNone when the step is not a
// wait for an agent (wait_phone_home waits for cloud-init, not an agent).
AgentIn agent_awaited(ProvisionState state, std::string_view step);

// The last_error of a node whose `state` timed out at `step` after
// `timeout` (e.g. "6s"): the step's `late` sentence when it has one, else
// "" (the caller writes the generic message).
std::string late_step_reason(ProvisionState state, std::string_view step, std::string_view timeout);

// Whether `step` is one of the on-demand flow's ramdisk steps (the ones
// before its power off), i.e. the node runs the deploy ramdisk meanwhile.
bool on_demand_ramdisk_step(std::string_view step);

}  // namespace kiln
