#include "controller/conductor/workflow.h"

namespace kiln {
namespace {

Error missing(const Driver& d, const char* what) {
  return Error(Code::kUnprocessable, "driver " + d.name + " cannot " + what);
}

// Summarises the failing checks of a validation report for last_error.
std::string failed_checks(const nlohmann::json& report) {
  std::string out;
  if (report.contains("checks") && report["checks"].is_array()) {
    for (const auto& c : report["checks"]) {
      if (c.value("status", "") != "fail") continue;
      if (!out.empty()) out += "; ";
      out += c.value("name", "?");
      std::string d = c.value("details", "");
      if (!d.empty()) out += ": " + d;
    }
  }
  return out.empty() ? "no failing check named" : out;
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

}  // namespace

Status Workflow::resolve(const Node& node, Run& run) const {
  run.driver = drivers_.find(node.bmc.driver);
  if (run.driver == nullptr)
    return Error(Code::kUnprocessable, "driver " + node.bmc.driver + " is not available in this build of kilnd");
  run.target.node_id = node.id;
  run.target.bmc = node.bmc;
  run.target.boot_mode = node.boot_mode;
  for (const Port& p : node.ports) run.target.macs.push_back(p.address);
  if (!node.bmc.password_sealed.empty()) {
    auto pw = secrets_.open(node.bmc.password_sealed);
    if (!pw) return Error(Code::kInternal, "cannot decrypt the BMC password: " + pw.error().message);
    run.target.password = std::move(*pw);
  }
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

asio::awaitable<bool> Workflow::validate(Run& run, const char* plan) {
  std::string plan_name = plan;
  if (!co_await step(run, plan_name == "burn_in" ? "burn_in" : "validate")) co_return false;
  if (!run.driver->validate) {
    run.out.status = missing(*run.driver, "validate");
    co_return false;
  }
  Result<nlohmann::json> rep = co_await run.driver->validate->validate(run.target, plan_name);
  if (!rep) {
    run.out.status = rep.take_error();
    co_return false;
  }
  run.out.validation = *rep;
  if (rep->value("result", "") != "pass") {
    run.out.status =
        Error(Code::kUnprocessable, "validation (" + plan_name + ") failed: " + failed_checks(*rep));
    co_return false;
  }
  co_return true;
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

asio::awaitable<StepOutcome> Workflow::run_state(const Node& node, ProvisionState state, const SetStep& set_step) {
  Run run;
  run.set_step = &set_step;
  Status r = resolve(node, run);
  if (!r) {
    run.out.status = r;
    co_return run.out;
  }
  if (state == ProvisionState::kVerifying) {
    co_await verifying(run);
  } else if (state == ProvisionState::kInspecting) {
    co_await inspecting(run);
  } else if (state == ProvisionState::kCleaning) {
    co_await cleaning(run);
  } else if (state == ProvisionState::kBurningIn) {
    co_await burning_in(run);
  } else if (state == ProvisionState::kDeploying) {
    co_await deploying(run, node.image);
  } else if (state == ProvisionState::kValidating) {
    bool passed = co_await validate(run, "quick");
    (void)passed;
  } else {
    run.out.status = Error(Code::kInternal, "no workflow for state " + std::string(to_string(state)));
  }
  co_return run.out;
}

}  // namespace kiln
