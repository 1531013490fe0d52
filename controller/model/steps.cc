#include "controller/model/steps.h"

#include <cassert>

namespace kiln {
namespace {

using S = ProvisionState;
using A = AgentIn;
using B = BootsInto;

constexpr StepInfo kSteps[] = {
    {StepId::kVerifyBmc, "verify_bmc", kNeedManagement, "verify a BMC", A::kNone, B::kNone},
    {StepId::kReadPower, "read_power", kNeedPower, "control power", A::kNone, B::kNone},
    {StepId::kInspect, "inspect", kNeedInspect, "inspect", A::kRamdisk, B::kRamdisk},
    {StepId::kSetBootPxe, "set_boot_pxe", kNeedManagement, "set the boot device", A::kNone, B::kRamdisk},
    {StepId::kBootRamdisk, "set_boot_pxe", kNeedManagement | kNeedAgent | kNeedPort, "set the boot device",
     A::kNone, B::kRamdisk},
    {StepId::kPowerOn, "power_on", kNeedPower, "control power", A::kNone, B::kNone},
    {StepId::kPowerOnOrReboot, "power_on", kNeedPower, "control power", A::kNone, B::kNone},
    {StepId::kPowerOff, "power_off", kNeedPower, "control power", A::kNone, B::kNone},
    {StepId::kReboot, "reboot", kNeedPower, "control power", A::kNone, B::kNone},
    {StepId::kWaitAgent, "wait_agent", kNeedAgent | kNeedPort, "run kiln-agent", A::kRamdisk, B::kRamdisk},
    {StepId::kClean, "clean", kNeedClean, "clean", A::kNone, B::kNone},
    {StepId::kWipe, "wipe", kNeedClean | kNeedAgent, "clean", A::kRamdisk, B::kRamdisk},
    {StepId::kBurnIn, "burn_in", kNeedValidate, "validate", A::kRamdisk, B::kRamdisk},
    {StepId::kWriteImage, "write_image", kNeedDeploy, "deploy", A::kRamdisk, B::kRamdisk},
    {StepId::kWriteConfigDrive, "write_config_drive", kNeedDeploy | kNeedAgent, "deploy", A::kRamdisk,
     B::kRamdisk},
    {StepId::kSetBootDisk, "set_boot_disk", kNeedManagement, "set the boot device", A::kNone, B::kDisk},
    {StepId::kWaitBoot, "wait_boot", kNeedAgent, "run kiln-agent", A::kOs, B::kDisk},
    {StepId::kValidate, "validate", kNeedValidate, "validate", A::kOs, B::kDisk},
    {StepId::kDefineDomain, "define_domain", kNeedDeploy, "deploy", A::kNone, B::kNone},
    {StepId::kTeardown, "teardown", kNeedClean, "tear down a virtual machine", A::kNone, B::kNone},
    {StepId::kSkipBurnIn, "burn_in", kNeedNothing, "", A::kNone, B::kNone},
    {StepId::kValidateOnce, "validate", kNeedValidate, "validate", A::kRamdisk, B::kRamdisk},
    {StepId::kValidateInRamdisk, "validate", kNeedValidate, "validate", A::kRamdisk, B::kRamdisk},
    // Nothing of the driver's: the broker sees the post (the node's
    // ssh_host_keys, stored), whichever kilnd took it.
    {StepId::kWaitPhoneHome, "wait_phone_home", kNeedNothing, "", A::kNone, B::kDisk,
     "the OS did not phone home within {}: is cloud-init's phone_home enabled in the image?"},
    {StepId::kValidatedInRamdisk, "validated_in_ramdisk", kNeedNothing, "", A::kNone, B::kDisk},
    {StepId::kNoInBandValidation, "no_in_band_validation", kNeedNothing, "", A::kNone, B::kNone},
};

using F = FlowStep;
using K = StepId;

// Drivers that do the work themselves (fake).
constexpr F kVerifying[] = {{K::kVerifyBmc}, {K::kReadPower, true}};
constexpr F kInspecting[] = {{K::kInspect}};
constexpr F kCleaning[] = {{K::kSetBootPxe}, {K::kPowerOn}, {K::kClean}, {K::kPowerOff}};
constexpr F kBurningIn[] = {{K::kPowerOn}, {K::kBurnIn}, {K::kPowerOff}};
constexpr F kDeploying[] = {{K::kSetBootPxe}, {K::kPowerOn}, {K::kWriteImage}, {K::kSetBootDisk}, {K::kReboot}};
constexpr F kValidating[] = {{K::kValidate}};

// kiln-agent: in-band work in the deploy ramdisk or the OS. Cleaning leaves
// the ramdisk up for burn-in, which powers off when done.
constexpr F kAgentInspecting[] = {{K::kBootRamdisk}, {K::kPowerOnOrReboot}, {K::kWaitAgent}, {K::kInspect},
                                  {K::kPowerOff}};
constexpr F kAgentCleaning[] = {{K::kBootRamdisk}, {K::kPowerOnOrReboot}, {K::kWaitAgent}, {K::kWipe}};
constexpr F kAgentBurningIn[] = {{K::kBurnIn}, {K::kPowerOff}};
constexpr F kAgentDeploying[] = {{K::kBootRamdisk}, {K::kPowerOnOrReboot}, {K::kWaitAgent},
                                 {K::kWriteImage},  {K::kWriteConfigDrive}, {K::kSetBootDisk},
                                 {K::kReboot},      {K::kWaitBoot}};
constexpr F kAgentValidating[] = {{K::kValidate}};
// An image whose OS runs no kiln-agent (a distro cloud image): the node is
// proven in the ramdisk before anything of the tenant's is on it, and the
// OS's only word is cloud-init's phone_home.
constexpr F kAgentDeployingNoOsAgent[] = {{K::kBootRamdisk}, {K::kPowerOnOrReboot},  {K::kWaitAgent},
                                          {K::kValidateInRamdisk}, {K::kWriteImage}, {K::kWriteConfigDrive},
                                          {K::kSetBootDisk}, {K::kReboot},           {K::kWaitPhoneHome}};
constexpr F kAgentValidatingNoOsAgent[] = {{K::kValidatedInRamdisk}};

// Virtual nodes: no PXE stage. Without an agent in the image nothing is
// waited for: the domain runs.
constexpr F kVirtualDeploying[] = {{K::kDefineDomain}, {K::kWaitBoot, true}};
constexpr F kVirtualCleaning[] = {{K::kTeardown}};
constexpr F kVirtualBurningIn[] = {{K::kSkipBurnIn}};
// Without an agent in the image: no ramdisk stage, so nothing is measured
// in band, and validating says so rather than claim a pass.
constexpr F kVirtualDeployingNoOsAgent[] = {{K::kDefineDomain}, {K::kWaitPhoneHome}};
constexpr F kVirtualValidatingNoOsAgent[] = {{K::kNoInBandValidation}};

constexpr F kOnDemand[] = {{K::kBootRamdisk}, {K::kPowerOnOrReboot}, {K::kWaitAgent}, {K::kValidateOnce}};

using FK = FlowKind;
using IA = ImageAgent;

const Flow kFlows[] = {
    {S::kVerifying, FK::kOutOfBand, false, kVerifying, {}},
    {S::kInspecting, FK::kOutOfBand, false, kInspecting, {}},
    {S::kCleaning, FK::kOutOfBand, false, kCleaning, {}},
    {S::kBurningIn, FK::kOutOfBand, false, kBurningIn, {}},
    {S::kDeploying, FK::kOutOfBand, false, kDeploying, {}},
    {S::kValidating, FK::kOutOfBand, false, kValidating, {}},
    {S::kInspecting, FK::kAgent, true, kAgentInspecting, {}},
    {S::kCleaning, FK::kAgent, true, kAgentCleaning, {}},
    {S::kBurningIn, FK::kAgent, true, kAgentBurningIn, {}},
    {S::kDeploying, FK::kAgent, true, kAgentDeploying, {}, IA::kRuns},
    {S::kValidating, FK::kAgent, true, kAgentValidating, {}, IA::kRuns},
    {S::kDeploying, FK::kAgent, true, kAgentDeployingNoOsAgent, {}, IA::kNone},
    {S::kValidating, FK::kAgent, true, kAgentValidatingNoOsAgent, {}, IA::kNone},
    {S::kDeploying, FK::kVirtual, true, kVirtualDeploying, {}, IA::kRuns},
    {S::kDeploying, FK::kVirtual, true, kVirtualDeployingNoOsAgent, {}, IA::kNone},
    {S::kValidating, FK::kVirtual, true, kVirtualValidatingNoOsAgent, {}, IA::kNone},
    {S::kCleaning, FK::kVirtual, true, kVirtualCleaning, {}},
    {S::kBurningIn, FK::kVirtual, true, kVirtualBurningIn, {}},
};

const Flow kOnDemandFlow = {S::kManageable, FK::kOnDemand, false, kOnDemand, StepId::kPowerOff};

// The step of `flow` a node at `step` is at: the named one, else (starting,
// or a name the flow lacks) the first.
size_t position(const Flow& flow, std::string_view step) { return step_index(flow, step).value_or(0); }

// The agent flow of `state` a node at `step` runs: the one (of either kind
// of image) that has a step of that name, else the one for images with an
// agent. Null when the state has no agent flow.
const Flow* agent_flow_at(ProvisionState state, std::string_view step) {
  for (const Flow& f : kFlows)
    if (f.state == state && f.kind == FlowKind::kAgent && step_index(f, step)) return &f;
  return find_flow(state, FlowKind::kAgent);
}

}  // namespace

const StepInfo& step_info(StepId id) {
  const StepInfo& s = kSteps[static_cast<size_t>(id)];
  assert(s.id == id && "kSteps is in StepId order");
  return s;
}

const Flow* find_flow(ProvisionState state, FlowKind kind, bool os_agent) {
  const ImageAgent want = os_agent ? ImageAgent::kRuns : ImageAgent::kNone;
  for (const Flow& f : kFlows)
    if (f.state == state && f.kind == kind && (f.image_agent == ImageAgent::kAny || f.image_agent == want)) return &f;
  return nullptr;
}

const Flow& on_demand_flow() { return kOnDemandFlow; }

std::optional<size_t> step_index(const Flow& flow, std::string_view name) {
  for (size_t i = 0; i < flow.steps.size(); ++i)
    if (step_info(flow.steps[i].id).name == name) return i;
  return std::nullopt;
}

BootsInto boots_into(ProvisionState state, std::string_view step) {
  const Flow* f = agent_flow_at(state, step);
  if (f == nullptr) return BootsInto::kNone;
  // A step that changes nothing (power off) keeps what the last one set.
  for (size_t i = position(*f, step) + 1; i-- > 0;) {
    BootsInto b = step_info(f->steps[i].id).boots;
    if (b != BootsInto::kNone) return b;
  }
  for (const FlowStep& s : f->steps)
    if (step_info(s.id).boots != BootsInto::kNone) return step_info(s.id).boots;
  return BootsInto::kNone;
}

AgentIn agent_awaited(ProvisionState state, std::string_view step) {
  const Flow* f = agent_flow_at(state, step);
  if (f == nullptr) return AgentIn::kNone;
  return step_info(f->steps[position(*f, step)].id).agent;
}

std::string late_step_reason(ProvisionState state, std::string_view step, std::string_view timeout) {
  for (const Flow& f : kFlows) {
    if (f.state != state) continue;
    std::optional<size_t> i = step_index(f, step);
    if (!i) continue;
    std::string_view late = step_info(f.steps[*i].id).late;
    if (late.empty()) continue;
    std::string out(late);
    if (size_t at = out.find("{}"); at != std::string::npos) out.replace(at, 2, timeout);
    return out;
  }
  return "";
}

bool on_demand_ramdisk_step(std::string_view step) { return step_index(kOnDemandFlow, step).has_value(); }

}  // namespace kiln
