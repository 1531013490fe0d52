#include "controller/conductor/workflow.h"

#include "controller/conductor/driver_target.h"

#include <algorithm>

#include "controller/model/validation.h"

namespace kiln {
namespace {

Error missing(const Driver& d, const char* what) {
  return Error(Code::kUnprocessable, "driver " + d.name + " cannot " + what);
}

const char* power_step_name(PowerAction a) {
  switch (a) {
    case PowerAction::kOff: return "power_off";
    case PowerAction::kSoftOff: return "soft_power_off";
    case PowerAction::kReboot: return "reboot";
    case PowerAction::kOn: return "power_on";
  }
  return "power";
}

const std::vector<std::string> kAgentInspecting = {"set_boot_pxe", "power_on", "wait_agent", "inspect",
                                                   "power_off"};
const std::vector<std::string> kAgentCleaning = {"set_boot_pxe", "power_on", "wait_agent", "wipe"};
const std::vector<std::string> kAgentBurningIn = {"burn_in", "power_off"};
const std::vector<std::string> kAgentDeploying = {"set_boot_pxe", "power_on",      "wait_agent", "write_image",
                                                  "set_boot_disk", "reboot", "wait_boot"};
const std::vector<std::string> kAgentValidating = {"validate"};

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

asio::awaitable<bool> Workflow::step(Run& run, const char* name) {
  std::string step_name = name;  // named: no temporaries inside co_await (GCC 12)
  bool held = co_await (*run.set_step)(step_name);
  if (!held) {
    run.out.lost = true;
    co_return false;
  }
  co_return true;
}

asio::awaitable<bool> Workflow::power_to(Run& run, PowerAction action) {
  if (!co_await step(run, power_step_name(action))) co_return false;
  if (!run.driver->power) {
    run.out.status = missing(*run.driver, "control power");
    co_return false;
  }
  Status s = co_await run.driver->power->set_power_state(run.target, action);
  if (!s) {
    run.out.status = s;
    co_return false;
  }
  run.out.power_state = power_action_result(action);
  co_return true;
}

asio::awaitable<bool> Workflow::boot(Run& run, BootDevice device, bool persistent) {
  if (!co_await step(run, device == BootDevice::kPxe ? "set_boot_pxe" : "set_boot_disk")) co_return false;
  if (!run.driver->management) {
    run.out.status = missing(*run.driver, "set the boot device");
    co_return false;
  }
  Status s = co_await run.driver->management->set_boot_device(run.target, device, persistent);
  if (!s) {
    run.out.status = s;
    co_return false;
  }
  co_return true;
}

// The hand-off gate (controller/model/validation.h): a numeric miss is
// retried once; a second one, or any other failure, fails the state, which
// quarantines the node. Without a profile nothing is run and a note says so
// (no report is made up).
asio::awaitable<bool> Workflow::validate(Run& run, const char* plan) {
  std::string plan_name = plan;
  if (!co_await step(run, plan_name == "burn_in" ? "burn_in" : "validate")) co_return false;
  if (run.profile.empty()) {
    run.out.note = plan_name == "burn_in" ? "no profile: burn-in skipped" : "no profile: validation skipped";
    log_.info("validation skipped", {{"node", run.target.node_id}, {"reason", "no profile"}});
    co_return true;
  }
  if (!profile_problem_.empty()) {
    run.out.status = Error(Code::kUnprocessable, profile_problem_);
    co_return false;
  }
  if (!run.driver->validate) {
    run.out.status = missing(*run.driver, "validate");
    co_return false;
  }
  const std::string gate_plan = plan_name == "burn_in" ? std::string("full") : plan_name;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    Result<nlohmann::json> rep = co_await run.driver->validate->validate(run.target, plan_name);
    if (!rep) {
      run.out.status = rep.take_error();
      co_return false;
    }
    run.out.validation = *rep;
    run.out.validations.push_back(*rep);
    GateDecision d = judge_report(*rep, profile_doc_, gate_plan, attempt);
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

asio::awaitable<void> Workflow::verifying(Run& run) {
  if (!co_await step(run, "verify_bmc")) co_return;
  if (!run.driver->management) {
    run.out.status = missing(*run.driver, "verify a BMC");
    co_return;
  }
  Status s = co_await run.driver->management->verify(run.target);
  if (!s) {
    run.out.status = s;
    co_return;
  }
  if (!run.driver->power) co_return;
  if (!co_await step(run, "read_power")) co_return;
  Result<PowerState> p = co_await run.driver->power->get_power_state(run.target);
  if (!p) {
    run.out.status = p.take_error();
    co_return;
  }
  run.out.power_state = *p;
}

asio::awaitable<void> Workflow::inspecting(Run& run) {
  if (!co_await step(run, "inspect")) co_return;
  if (!run.driver->inspect) {
    run.out.status = missing(*run.driver, "inspect");
    co_return;
  }
  Result<nlohmann::json> inv = co_await run.driver->inspect->inspect(run.target);
  if (!inv) {
    run.out.status = inv.take_error();
    co_return;
  }
  run.out.inventory = std::move(*inv);
}

asio::awaitable<void> Workflow::cleaning(Run& run) {
  if (!co_await boot(run, BootDevice::kPxe, false)) co_return;
  if (!co_await power_to(run, PowerAction::kOn)) co_return;
  if (!co_await step(run, "clean")) co_return;
  if (!run.driver->clean) {
    run.out.status = missing(*run.driver, "clean");
    co_return;
  }
  Status s = co_await run.driver->clean->clean(run.target);
  if (!s) {
    run.out.status = s;
    co_return;
  }
  bool off = co_await power_to(run, PowerAction::kOff);
  (void)off;  // a failure is already in run.out
}

asio::awaitable<void> Workflow::burning_in(Run& run) {
  if (!co_await power_to(run, PowerAction::kOn)) co_return;
  if (!co_await validate(run, "burn_in")) co_return;
  bool off = co_await power_to(run, PowerAction::kOff);
  (void)off;
}

asio::awaitable<void> Workflow::deploying(Run& run, const std::string& image) {
  if (!co_await boot(run, BootDevice::kPxe, false)) co_return;
  if (!co_await power_to(run, PowerAction::kOn)) co_return;
  if (!co_await step(run, "write_image")) co_return;
  if (!run.driver->deploy) {
    run.out.status = missing(*run.driver, "deploy");
    co_return;
  }
  DeployRequest request;
  request.image = image;
  Status s = co_await run.driver->deploy->deploy(run.target, request);
  if (!s) {
    run.out.status = s;
    co_return;
  }
  if (!co_await boot(run, BootDevice::kDisk, true)) co_return;
  bool rebooted = co_await power_to(run, PowerAction::kReboot);
  (void)rebooted;
}

// --- the agent's path ---

bool Workflow::todo(const Run& run, const char* step) {
  if (run.flow == nullptr || run.resume_step.empty()) return true;
  const std::vector<std::string>& f = *run.flow;
  auto resume = std::find(f.begin(), f.end(), run.resume_step);
  if (resume == f.end()) return true;  // "starting", or a step of another path
  auto here = std::find(f.begin(), f.end(), std::string(step));
  return here >= resume;
}

bool Workflow::can_boot_agent(Run& run) {
  if (!run.target.macs.empty()) return true;
  run.out.status = Error(Code::kUnprocessable,
                         "cannot boot kiln-agent: the node has no port (the agent finds its node by MAC)");
  return false;
}

asio::awaitable<bool> Workflow::boot_ramdisk(Run& run) {
  if (!co_await step(run, "set_boot_pxe")) co_return false;
  Status forgot = co_await run.driver->agent->forget(run.target);
  if (!forgot) {
    run.out.status = forgot;
    co_return false;
  }
  if (!run.driver->management) {
    run.out.status = missing(*run.driver, "set the boot device");
    co_return false;
  }
  Status s = co_await run.driver->management->set_boot_device(run.target, BootDevice::kPxe, false);
  if (!s) {
    run.out.status = s;
    co_return false;
  }
  co_return true;
}

// A node that is already on (running its OS before an undeploy, or the
// ramdisk of an earlier boot) is rebooted so it network-boots afresh.
asio::awaitable<bool> Workflow::power_on_or_reboot(Run& run) {
  if (!co_await step(run, "power_on")) co_return false;
  if (!run.driver->power) {
    run.out.status = missing(*run.driver, "control power");
    co_return false;
  }
  Result<PowerState> now = co_await run.driver->power->get_power_state(run.target);
  PowerAction action = PowerAction::kOn;
  if (now && *now == PowerState::kOn) action = PowerAction::kReboot;
  Status s = co_await run.driver->power->set_power_state(run.target, action);
  if (!s) {
    run.out.status = s;
    co_return false;
  }
  run.out.power_state = PowerState::kOn;
  co_return true;
}

asio::awaitable<bool> Workflow::wait_agent(Run& run, const char* name, AgentPhase phase) {
  if (!co_await step(run, name)) co_return false;
  Status s = co_await run.driver->agent->wait_for_agent(run.target, phase);
  if (!s) {
    run.out.status = s;
    co_return false;
  }
  co_return true;
}

asio::awaitable<void> Workflow::agent_inspecting(Run& run) {
  run.flow = &kAgentInspecting;
  if (!can_boot_agent(run)) co_return;
  if (todo(run, "set_boot_pxe")) {
    if (!co_await boot_ramdisk(run)) co_return;
  }
  if (todo(run, "power_on")) {
    if (!co_await power_on_or_reboot(run)) co_return;
  }
  if (todo(run, "wait_agent")) {
    if (!co_await wait_agent(run, "wait_agent", AgentPhase::kRamdisk)) co_return;
  }
  if (todo(run, "inspect")) {
    if (!co_await step(run, "inspect")) co_return;
    Result<nlohmann::json> inv = co_await run.driver->inspect->inspect(run.target);
    if (!inv) {
      run.out.status = inv.take_error();
      co_return;
    }
    run.out.inventory = std::move(*inv);
  }
  bool off = co_await power_to(run, PowerAction::kOff);
  (void)off;
}

asio::awaitable<void> Workflow::agent_cleaning(Run& run) {
  run.flow = &kAgentCleaning;
  if (!can_boot_agent(run)) co_return;
  if (todo(run, "set_boot_pxe")) {
    if (!co_await boot_ramdisk(run)) co_return;
  }
  if (todo(run, "power_on")) {
    if (!co_await power_on_or_reboot(run)) co_return;
  }
  if (todo(run, "wait_agent")) {
    if (!co_await wait_agent(run, "wait_agent", AgentPhase::kRamdisk)) co_return;
  }
  if (!co_await step(run, "wipe")) co_return;
  Status s = co_await run.driver->clean->clean(run.target);
  if (!s) run.out.status = s;
  // The ramdisk stays up: burn-in runs on it next.
}

asio::awaitable<void> Workflow::agent_burning_in(Run& run) {
  run.flow = &kAgentBurningIn;
  if (todo(run, "burn_in")) {
    if (run.profile.empty()) {
      if (!co_await step(run, "burn_in")) co_return;
      run.out.note = "no profile: burn-in skipped";
      log_.info("burn-in skipped", {{"node", run.target.node_id}, {"reason", "no profile"}});
    } else {
      if (!co_await validate(run, "burn_in")) co_return;
    }
  }
  bool off = co_await power_to(run, PowerAction::kOff);
  (void)off;
}

asio::awaitable<void> Workflow::agent_deploying(Run& run, const std::string& image) {
  run.flow = &kAgentDeploying;
  if (!can_boot_agent(run)) co_return;
  if (todo(run, "set_boot_pxe")) {
    if (!co_await boot_ramdisk(run)) co_return;
  }
  if (todo(run, "power_on")) {
    if (!co_await power_on_or_reboot(run)) co_return;
  }
  if (todo(run, "wait_agent")) {
    if (!co_await wait_agent(run, "wait_agent", AgentPhase::kRamdisk)) co_return;
  }
  if (todo(run, "write_image")) {
    if (!co_await step(run, "write_image")) co_return;
    DeployRequest request;
    request.image = image;
    Status s = co_await run.driver->deploy->deploy(run.target, request);
    if (!s) {
      run.out.status = s;
      co_return;
    }
  }
  if (todo(run, "set_boot_disk")) {
    if (!co_await boot(run, BootDevice::kDisk, true)) co_return;
  }
  if (todo(run, "reboot")) {
    if (!co_await power_to(run, PowerAction::kReboot)) co_return;
  }
  bool booted = co_await wait_agent(run, "wait_boot", AgentPhase::kOs);
  (void)booted;  // a failure is already in run.out
}

asio::awaitable<void> Workflow::agent_validating(Run& run) {
  run.flow = &kAgentValidating;
  if (run.profile.empty()) {
    if (!co_await step(run, "validate")) co_return;
    run.out.note = "no profile: validation skipped";
    log_.info("validation skipped", {{"node", run.target.node_id}, {"reason", "no profile"}});
    co_return;
  }
  bool passed = co_await validate(run, "quick");
  (void)passed;
}

// --- virtual nodes ---

asio::awaitable<void> Workflow::virtual_deploying(Run& run, const std::string& image) {
  static const std::vector<std::string> kVirtualDeploying = {"define_domain", "wait_boot"};
  run.flow = &kVirtualDeploying;
  if (todo(run, "define_domain")) {
    if (!co_await step(run, "define_domain")) co_return;
    if (!run.driver->deploy) {
      run.out.status = missing(*run.driver, "deploy");
      co_return;
    }
    if (run.driver->agent) {
      // A new deploy: the agent state of the last one (its os secret
      // included) is forgotten, so the seed hands out a fresh secret.
      Status forgot = co_await run.driver->agent->forget(run.target);
      if (!forgot) {
        run.out.status = forgot;
        co_return;
      }
    }
    DeployRequest request;
    request.image = image;
    Status s = co_await run.driver->deploy->deploy(run.target, request);
    if (!s) {
      run.out.status = s;
      co_return;
    }
    run.out.power_state = PowerState::kOn;
  }
  if (!run.driver->agent) co_return;  // nothing to wait for: the domain runs
  // The port made for the domain's MAC is not in run.target yet (it was read
  // before the deploy); the broker finds the node by MAC in the store.
  bool booted = co_await wait_agent(run, "wait_boot", AgentPhase::kOs);
  (void)booted;  // a failure is already in run.out
}

asio::awaitable<void> Workflow::virtual_cleaning(Run& run) {
  if (!co_await step(run, "teardown")) co_return;
  if (!run.driver->clean) {
    run.out.status = missing(*run.driver, "tear down a virtual machine");
    co_return;
  }
  Status s = co_await run.driver->clean->clean(run.target);
  if (!s) {
    run.out.status = s;
    co_return;
  }
  run.out.power_state = PowerState::kOff;
}

asio::awaitable<StepOutcome> Workflow::run_state(const Node& node, ProvisionState state, const SetStep& set_step,
                                                 const HeldCheck& still_held) {
  Run run;
  run.set_step = &set_step;
  run.profile = node.profile;
  run.resume_step = node.provision_step;
  Status r = resolve(node, run);
  if (!r) {
    run.out.status = r;
    co_return run.out;
  }
  run.target.still_held = still_held;
  run.target.profile = profile_doc_;
  run.target.allocation = node.allocation;
  bool agent = run.driver->agent != nullptr;
  if (node.kind == NodeKind::kVirtual && state == ProvisionState::kDeploying) {
    co_await virtual_deploying(run, node.image);
    co_return run.out;
  }
  if (node.kind == NodeKind::kVirtual && state == ProvisionState::kCleaning) {
    co_await virtual_cleaning(run);
    co_return run.out;
  }
  if (node.kind == NodeKind::kVirtual && state == ProvisionState::kBurningIn) {
    if (co_await step(run, "burn_in")) {
      run.out.note = "virtual node: burn-in skipped (its machine is re-created and validated at each deploy)";
      run.out.power_state = PowerState::kOff;
    }
    co_return run.out;
  }
  if (state == ProvisionState::kVerifying) {
    co_await verifying(run);
  } else if (state == ProvisionState::kInspecting) {
    if (agent && run.driver->inspect && run.driver->inspect->in_band(run.target)) {
      co_await agent_inspecting(run);
    } else {
      co_await inspecting(run);
    }
  } else if (state == ProvisionState::kCleaning) {
    if (agent) {
      co_await agent_cleaning(run);
    } else {
      co_await cleaning(run);
    }
  } else if (state == ProvisionState::kBurningIn) {
    if (agent) {
      co_await agent_burning_in(run);
    } else {
      co_await burning_in(run);
    }
  } else if (state == ProvisionState::kDeploying) {
    if (agent) {
      co_await agent_deploying(run, node.image);
    } else {
      co_await deploying(run, node.image);
    }
  } else if (state == ProvisionState::kValidating) {
    if (agent) {
      co_await agent_validating(run);
    } else {
      bool passed = co_await validate(run, "quick");
      (void)passed;
    }
  } else {
    run.out.status = Error(Code::kInternal, "no workflow for state " + std::string(to_string(state)));
  }
  co_return run.out;
}

}  // namespace kiln
