#include "controller/conductor/workflow.h"

#include "controller/conductor/driver_target.h"

#include "controller/model/validation.h"

namespace kiln {
namespace {

using Steady = std::chrono::steady_clock;

Error missing(const Driver& d, std::string_view what) {
  return Error(Code::kUnprocessable, "driver " + d.name + " cannot " + std::string(what));
}

// The Need bits `d` offers for `t`.
uint16_t offered(const Driver& d, const DriverTarget& t) {
  uint16_t n = 0;
  if (d.power) n |= kNeedPower;
  if (d.management) n |= kNeedManagement;
  if (d.inspect) n |= kNeedInspect;
  if (d.clean) n |= kNeedClean;
  if (d.deploy) n |= kNeedDeploy;
  if (d.validate) n |= kNeedValidate;
  if (d.agent) n |= kNeedAgent;
  if (!t.macs.empty()) n |= kNeedPort;
  return n;
}

// What step `id` needs that is missing; validation needs nothing without a
// profile (the step is then a note).
uint16_t lacking(StepId id, uint16_t have, bool profiled) {
  uint16_t need = step_info(id).needs;
  if (!profiled) need &= static_cast<uint16_t>(~kNeedValidate);
  return need & static_cast<uint16_t>(~have);
}

Error cannot(const Driver& d, StepId id, uint16_t lack) {
  if (lack & kNeedPort)
    return Error(Code::kUnprocessable,
                 "cannot boot kiln-agent: the node has no port (the agent finds its node by MAC)");
  return missing(d, step_info(id).cannot);
}

// Flow choice: a virtual node's own flows, then kiln-agent's (inspection
// only when the driver inspects in band), then the out-of-band ones.
// In deploying and validating, the flows for the image's kind (os_agent).
const Flow* choose_flow(const Node& node, ProvisionState state, const Driver& d, const DriverTarget& t,
                        bool os_agent) {
  if (node.kind == NodeKind::kVirtual) {
    if (const Flow* f = find_flow(state, FlowKind::kVirtual, os_agent)) return f;
  }
  bool agent = d.agent != nullptr;
  if (state == ProvisionState::kInspecting) agent = agent && d.inspect && d.inspect->in_band(t);
  if (agent) {
    if (const Flow* f = find_flow(state, FlowKind::kAgent, os_agent)) return f;
  }
  return find_flow(state, FlowKind::kOutOfBand, os_agent);
}

// run.out.status = s when s failed; whether it succeeded.
bool ok(StepOutcome& out, Status s) {
  if (s) return true;
  out.status = std::move(s);
  return false;
}

std::string seconds(std::chrono::milliseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

}  // namespace

Status Workflow::resolve(const Node& node, Run& run) const {
  run.driver = drivers_.find(node.bmc.driver);
  if (run.driver == nullptr)
    return Error(Code::kUnprocessable, "driver " + node.bmc.driver + " is not available in this build of kilnd");
  Result<DriverTarget> target = driver_target(node, secrets_);
  if (!target) return target.take_error();
  run.target = std::move(*target);
  return ok_status();
}

asio::awaitable<Result<PowerState>> Workflow::power(const Node& node, PowerAction action) {
  Run run;
  Status r = resolve(node, run);
  if (!r) co_return r.take_error();
  if (!run.driver->power) co_return missing(*run.driver, "control power");
  Status s = co_await run.driver->power->set_power_state(run.target, action);
  if (!s) co_return s.take_error();
  Result<PowerState> now = co_await run.driver->power->get_power_state(run.target);
  if (!now) co_return power_action_result(action);  // the driver confirmed the action itself
  co_return *now;
}

// --- the executor ---

// Not a coroutine: a switch is fine here (docs/coroutines.md).
Workflow::Action Workflow::action(StepId id) {
  using K = StepId;
  switch (id) {
    case K::kVerifyBmc: return &Workflow::verify_bmc;
    case K::kReadPower: return &Workflow::read_power;
    case K::kInspect: return &Workflow::inspect;
    case K::kSetBootPxe: return &Workflow::set_boot_pxe;
    case K::kBootRamdisk: return &Workflow::boot_ramdisk;
    case K::kPowerOn: return &Workflow::power_on;
    case K::kPowerOnOrReboot: return &Workflow::power_on_or_reboot;
    case K::kPowerOff: return &Workflow::power_off;
    case K::kReboot: return &Workflow::reboot;
    case K::kWaitAgent: return &Workflow::wait_agent;
    case K::kClean: return &Workflow::clean;
    case K::kWipe: return &Workflow::clean;  // the agent driver's clean is the agent's wipe
    case K::kBurnIn: return &Workflow::burn_in;
    case K::kWriteImage: return &Workflow::write_image;
    case K::kWriteConfigDrive: return &Workflow::write_config_drive;
    case K::kSetBootDisk: return &Workflow::set_boot_disk;
    case K::kWaitBoot: return &Workflow::wait_boot;
    case K::kValidate: return &Workflow::validate;
    case K::kDefineDomain: return &Workflow::define_domain;
    case K::kTeardown: return &Workflow::teardown;
    case K::kSkipBurnIn: return &Workflow::skip_burn_in;
    case K::kValidateOnce: return &Workflow::validate_once;
    case K::kValidateInRamdisk: return &Workflow::validate;  // the same gate, run by the ramdisk's agent
    case K::kWaitPhoneHome: return &Workflow::wait_phone_home;
    case K::kValidatedInRamdisk: return &Workflow::validated_in_ramdisk;
    case K::kNoInBandValidation: return &Workflow::no_in_band_validation;
  }
  return &Workflow::skip_burn_in;  // not reached: every StepId has a case (-Wswitch)
}

asio::awaitable<bool> Workflow::run_step(Run& run, StepId id) {
  std::string name(step_info(id).name);  // named: no temporaries inside co_await (GCC 12)
  bool held = co_await (*run.set_step)(name);
  if (!held) {
    run.out.lost = true;
    run.failed_step = name;
    co_return false;
  }
  Action act = action(id);
  bool done = co_await (this->*act)(run);
  if (!done) run.failed_step = name;
  co_return done;
}

asio::awaitable<void> Workflow::execute(Run& run, const Flow& flow, std::string resume_step) {
  // Every step's needs, up front: nothing is touched on a node whose driver
  // cannot finish the flow.
  const uint16_t have = offered(*run.driver, run.target);
  for (const FlowStep& fs : flow.steps) {
    uint16_t lack = lacking(fs.id, have, !run.profile.empty());
    if (lack != 0 && !fs.optional) {
      run.out.status = cannot(*run.driver, fs.id, lack);
      co_return;
    }
  }
  size_t first = flow.resumable ? step_index(flow, resume_step).value_or(0) : 0;
  for (size_t i = first; i < flow.steps.size(); ++i) {
    const FlowStep& fs = flow.steps[i];
    if (fs.optional && lacking(fs.id, have, !run.profile.empty()) != 0) continue;
    bool done = co_await run_step(run, fs.id);
    if (!done) co_return;
  }
}

asio::awaitable<StepOutcome> Workflow::run_state(const Node& node, ProvisionState state, const SetStep& set_step,
                                                 const HeldCheck& still_held) {
  Run run;
  run.set_step = &set_step;
  run.profile = node.profile;
  run.image = node.image;
  run.node_name = node.name;
  run.last_validation = node.last_validation;
  if (own_config_drive_ && state == ProvisionState::kDeploying) run.own_drive = own_config_drive_(node);
  Status r = resolve(node, run);
  if (!r) {
    run.out.status = r;
    co_return run.out;
  }
  run.target.still_held = still_held;
  run.target.profile = profile_doc_;
  run.target.allocation = node.allocation;
  const Flow* flow = choose_flow(node, state, *run.driver, run.target, os_agent_);
  if (flow == nullptr) {
    run.out.status = Error(Code::kInternal, "no workflow for state " + std::string(to_string(state)));
    co_return run.out;
  }
  co_await execute(run, *flow, node.provision_step);
  co_return run.out;
}

asio::awaitable<OnDemandOutcome> Workflow::run_on_demand(const Node& node, ValidationPlan plan, const SetStep& set_step,
                                                         const HeldCheck& still_held,
                                                         std::chrono::milliseconds timeout) {
  OnDemandOutcome result;
  Run run;
  run.set_step = &set_step;
  run.profile = node.profile;
  run.plan = plan;
  Status r = resolve(node, run);
  if (!r) {
    result.report = r.take_error();
    co_return result;
  }
  // An agent that never boots must not hold the node for ever: a stable
  // state has no timeout job, so the run carries its own deadline.
  const Steady::time_point deadline = Steady::now() + timeout;
  run.target.still_held = held_until(still_held, deadline);
  run.target.profile = profile_doc_;
  run.target.allocation = node.allocation;
  const Flow& flow = on_demand_flow();
  co_await execute(run, flow, "");
  if (!run.out.status && run.failed_step.empty()) {
    result.report = run.out.status.error();  // the driver cannot run the flow: nothing was touched
    co_return result;
  }
  if (run.out.status && !run.out.lost) {
    result.report = std::move(run.out.validation);
  } else {
    Error e = run.out.lost ? Error(Code::kConflict, "the run no longer holds the node") : run.out.status.error();
    if (Steady::now() >= deadline) e.message = "timed out after " + seconds(timeout);
    result.report = Error(e.code, "on-demand validation failed at step " + run.failed_step + ": " + e.message);
  }
  // Whatever happened: the node goes back to rest, and its agent is forgotten.
  if (flow.finally) {
    Run tail;
    tail.driver = run.driver;
    tail.target = run.target;
    tail.set_step = &set_step;
    bool off = co_await run_step(tail, *flow.finally);
    if (off) {
      result.power_state = tail.out.power_state;
    } else if (!tail.out.lost) {
      result.power_error = "on-demand validation: " + tail.failed_step + " failed: " + tail.out.status.error().message;
    }
  }
  if (run.driver->agent) {
    Status forgot = co_await run.driver->agent->forget(run.target);
    (void)forgot;
  }
  co_return result;
}

// --- the steps ---

// The hand-off gate (controller/model/validation.h): a numeric miss is
// retried once; a second one, or any other failure, fails the state, which
// quarantines the node. Without a profile nothing is run and a note says so
// (no report is made up).
asio::awaitable<bool> Workflow::gate(Run& run, ValidationPlan plan) {
  const bool burn_in = plan == ValidationPlan::kFull;
  if (run.profile.empty()) {
    run.out.note = burn_in ? "no profile: burn-in skipped" : "no profile: validation skipped";
    log_.info(burn_in ? "burn-in skipped" : "validation skipped",
              {{"node", run.target.node_id}, {"reason", "no profile"}});
    co_return true;
  }
  if (!profile_problem_.empty()) {
    run.out.status = Error(Code::kUnprocessable, profile_problem_);
    co_return false;
  }
  for (int attempt = 1; attempt <= 2; ++attempt) {
    Result<nlohmann::json> rep = co_await run.driver->validate->validate(run.target, plan);
    if (!rep) {
      run.out.status = rep.take_error();
      co_return false;
    }
    run.out.validation = *rep;
    run.out.validations.push_back(*rep);
    if (report_sink_) co_await report_sink_(*rep, attempt);
    GateDecision d = judge_report(*rep, profile_doc_, plan, attempt);
    if (d.verdict == GateVerdict::kPass) co_return true;
    if (d.verdict == GateVerdict::kQuarantine) {
      run.out.status = Error(Code::kUnprocessable, d.reason);
      co_return false;
    }
    log_.warn("validation numeric miss, retrying once", {{"node", run.target.node_id}, {"reason", d.reason}});
    if (run.target.still_held) {
      bool held = co_await run.target.still_held();
      if (!held) {
        run.out.lost = true;
        co_return false;
      }
    }
  }
  co_return false;  // not reached: attempt 2 never retries
}

asio::awaitable<bool> Workflow::verify_bmc(Run& run) {
  Status s = co_await run.driver->management->verify(run.target);
  co_return ok(run.out, std::move(s));
}

asio::awaitable<bool> Workflow::read_power(Run& run) {
  Result<PowerState> p = co_await run.driver->power->get_power_state(run.target);
  if (!p) {
    run.out.status = p.take_error();
    co_return false;
  }
  run.out.power_state = *p;
  co_return true;
}

asio::awaitable<bool> Workflow::inspect(Run& run) {
  Result<nlohmann::json> inv = co_await run.driver->inspect->inspect(run.target);
  if (!inv) {
    run.out.status = inv.take_error();
    co_return false;
  }
  run.out.inventory = std::move(*inv);
  co_return true;
}

asio::awaitable<bool> Workflow::set_boot_pxe(Run& run) {
  Status s = co_await run.driver->management->set_boot_device(run.target, BootDevice::kPxe, false);
  co_return ok(run.out, std::move(s));
}

// The last agent of the node (its secret included) is forgotten first, so
// the ramdisk that boots next gets a fresh session.
asio::awaitable<bool> Workflow::boot_ramdisk(Run& run) {
  Status forgot = co_await run.driver->agent->forget(run.target);
  if (!ok(run.out, std::move(forgot))) co_return false;
  bool pxe = co_await set_boot_pxe(run);
  co_return pxe;
}

asio::awaitable<bool> Workflow::power_on(Run& run) {
  Status s = co_await run.driver->power->set_power_state(run.target, PowerAction::kOn);
  if (!ok(run.out, std::move(s))) co_return false;
  run.out.power_state = PowerState::kOn;
  co_return true;
}

// A node that is already on (running its OS before an undeploy, or the
// ramdisk of an earlier boot) is rebooted so it network-boots afresh.
asio::awaitable<bool> Workflow::power_on_or_reboot(Run& run) {
  Result<PowerState> now = co_await run.driver->power->get_power_state(run.target);
  PowerAction action = PowerAction::kOn;
  if (now && *now == PowerState::kOn) action = PowerAction::kReboot;
  Status s = co_await run.driver->power->set_power_state(run.target, action);
  if (!ok(run.out, std::move(s))) co_return false;
  run.out.power_state = PowerState::kOn;
  co_return true;
}

asio::awaitable<bool> Workflow::power_off(Run& run) {
  Status s = co_await run.driver->power->set_power_state(run.target, PowerAction::kOff);
  if (!ok(run.out, std::move(s))) co_return false;
  run.out.power_state = PowerState::kOff;
  co_return true;
}

asio::awaitable<bool> Workflow::reboot(Run& run) {
  Status s = co_await run.driver->power->set_power_state(run.target, PowerAction::kReboot);
  if (!ok(run.out, std::move(s))) co_return false;
  run.out.power_state = power_action_result(PowerAction::kReboot);
  co_return true;
}

asio::awaitable<bool> Workflow::wait_agent(Run& run) {
  Status s = co_await run.driver->agent->wait_for_agent(run.target, AgentPhase::kRamdisk);
  co_return ok(run.out, std::move(s));
}

// clean (fake) and wipe (the agent driver's clean asks its agent to wipe).
// After the agent's wipe the ramdisk stays up: burn-in runs on it next.
asio::awaitable<bool> Workflow::clean(Run& run) {
  Status s = co_await run.driver->clean->clean(run.target);
  co_return ok(run.out, std::move(s));
}

asio::awaitable<bool> Workflow::burn_in(Run& run) {
  bool passed = co_await gate(run, ValidationPlan::kFull);
  co_return passed;
}

asio::awaitable<bool> Workflow::write_image(Run& run) {
  DeployRequest request;
  request.image = run.image;
  Status s = co_await run.driver->deploy->deploy(run.target, request);
  co_return ok(run.out, std::move(s));
}

// The allocation's keys and user data (through the conductor's lookup),
// packed by kilnd and written by the agent after the image
// (controller/tenancy/config_drive.h). A node without an allocation gets a
// drive too: its hostname and DHCP, so a cloud image boots the same way.
asio::awaitable<bool> Workflow::write_config_drive(Run& run) {
  ConfigDriveInput in;
  in.instance_id = config_drive_instance_id(run.target.node_id, run.target.allocation);
  in.hostname = config_drive_hostname(run.node_name, run.target.node_id);
  in.macs = run.target.macs;
  in.time = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  if (run.own_drive) {
    in.access = run.own_drive->access;
    if (!run.own_drive->hostname.empty()) in.hostname = run.own_drive->hostname;
  } else if (!run.target.allocation.empty()) {
    std::string id = run.target.allocation;
    Result<TenantAccess> access = Error(Code::kNotFound, "no allocation lookup in this kilnd");
    if (tenant_access_) access = co_await tenant_access_(id);
    if (access) {
      in.access = std::move(*access);
    } else if (access.error().code == Code::kNotFound) {
      log_.warn("config drive without keys", {{"allocation", id}, {"reason", access.error().message}});
    } else {
      run.out.status = Error(access.error().code, "config drive: allocation " + id + ": " + access.error().message);
      co_return false;
    }
  }
  if (phone_home_) {
    Result<std::string> url = co_await phone_home_(run.target.node_id);
    if (!url) {
      run.out.status = Error(url.error().code, "config drive: phone-home URL: " + url.error().message);
      co_return false;
    }
    in.phone_home_url = std::move(*url);
  }
  Result<std::string> iso = build_config_drive(in);
  if (!iso) {
    run.out.status = iso.take_error();
    co_return false;
  }
  std::string bytes = std::move(*iso);
  Status s = co_await run.driver->deploy->write_config_drive(run.target, bytes);
  co_return ok(run.out, std::move(s));
}

asio::awaitable<bool> Workflow::set_boot_disk(Run& run) {
  Status s = co_await run.driver->management->set_boot_device(run.target, BootDevice::kDisk, true);
  co_return ok(run.out, std::move(s));
}

// The port made for a virtual node's domain MAC is not in run.target (it was
// read before the deploy); the broker finds the node by MAC in the store.
asio::awaitable<bool> Workflow::wait_boot(Run& run) {
  Status s = co_await run.driver->agent->wait_for_agent(run.target, AgentPhase::kOs);
  co_return ok(run.out, std::move(s));
}

asio::awaitable<bool> Workflow::validate(Run& run) {
  bool passed = co_await gate(run, ValidationPlan::kQuick);
  co_return passed;
}

// Virtual nodes (kind virtual): the driver's deploy places the node
// on a hypervisor and defines and starts its domain.
asio::awaitable<bool> Workflow::define_domain(Run& run) {
  if (run.driver->agent) {
    // A new deploy: the agent state of the last one (its os secret
    // included) is forgotten, so the seed hands out a fresh secret.
    Status forgot = co_await run.driver->agent->forget(run.target);
    if (!ok(run.out, std::move(forgot))) co_return false;
  }
  bool written = co_await write_image(run);
  if (written) run.out.power_state = PowerState::kOn;
  co_return written;
}

// Undeploy's cleaning of a virtual node: domain, volume, port and capacity.
asio::awaitable<bool> Workflow::teardown(Run& run) {
  Status s = co_await run.driver->clean->clean(run.target);
  if (!ok(run.out, std::move(s))) co_return false;
  run.out.power_state = PowerState::kOff;
  co_return true;
}

// The VM is gone until the next deploy, which validates it.
asio::awaitable<bool> Workflow::skip_burn_in(Run& run) {
  run.out.note = "virtual node: burn-in skipped (its machine is re-created and validated at each deploy)";
  run.out.power_state = PowerState::kOff;
  co_return true;
}

asio::awaitable<bool> Workflow::validate_once(Run& run) {
  Result<nlohmann::json> rep = co_await run.driver->validate->validate(run.target, run.plan);
  if (!rep) {
    run.out.status = rep.take_error();
    co_return false;
  }
  run.out.validation = std::move(*rep);
  co_return true;
}

// An image without kiln-agent: the OS's only word is cloud-init's
// phone_home to the URL write_config_drive (or the NoCloud seed) gave it.
// A drive written without that URL (kilnd has no boot URL) would leave this
// waiting for nothing, so that is a failure at once. The broker watches the
// stored post, so a post taken by another kilnd, or while this one
// restarted, ends the wait too; the state's deadline bounds it (the timeout's
// message names the likely cause: steps.cc, wait_phone_home's `late`).
asio::awaitable<bool> Workflow::wait_phone_home(Run& run) {
  if (!phone_home_ || !phone_home_wait_) {
    run.out.status = Error(Code::kUnprocessable, "image " + run.image +
                                                     " runs no kiln-agent, and this kilnd cannot learn of its OS's "
                                                     "phone-home: nothing would say the OS booted");
    co_return false;
  }
  Result<std::string> url = co_await phone_home_(run.target.node_id);
  if (!url) {
    run.out.status = Error(url.error().code, "phone-home URL: " + url.error().message);
    co_return false;
  }
  if (url->empty()) {
    run.out.status = Error(Code::kUnprocessable, "image " + run.image +
                                                     " runs no kiln-agent, and kilnd has no boot URL to give its "
                                                     "cloud-init a phone-home URL: nothing would say the OS booted");
    co_return false;
  }
  Status s = co_await phone_home_wait_(run.target.node_id, run.target.still_held);
  co_return ok(run.out, std::move(s));
}

// Validating a bare-metal node whose image runs no kiln-agent: there is
// nobody in the OS to run the plan, and the deploying state ran it in the
// ramdisk before the write (the gate stored its report, which the node's
// last_validation names). Nothing is measured again; the note says where
// the proof is, so the hand-off claims only what was measured.
asio::awaitable<bool> Workflow::validated_in_ramdisk(Run& run) {
  if (run.profile.empty()) {
    run.out.note = "no profile: validation skipped";
    co_return true;
  }
  run.out.note = "validated in the deploy ramdisk before the image was written (image " + run.image +
                 " runs no kiln-agent): report " +
                 (run.last_validation.empty() ? std::string("not stored") : run.last_validation);
  co_return true;
}

// A virtual node with an image without kiln-agent: no ramdisk stage and no
// agent in the OS, so the profile's plan cannot run; no report is made up.
asio::awaitable<bool> Workflow::no_in_band_validation(Run& run) {
  run.out.note = run.profile.empty()
                     ? std::string("no profile: validation skipped")
                     : "no in-band validation: image " + run.image +
                           " runs no kiln-agent and a virtual node has no deploy ramdisk, so the profile's quick "
                           "plan was not run (no report)";
  co_return true;
}

}  // namespace kiln
