#pragma once
// Workflow: what the conductor does inside each transient state, in driver
// calls. It runs the flows of controller/model/steps.h (which steps, in what
// order, for which kind of node) with one executor, and knows neither the
// lock, the store nor the state table: the conductor hands it a node and a
// state, and gets back an outcome to record.
//
// The executor picks the flow (virtual nodes' own flows first, then the
// agent's when the driver has kiln-agent, and for inspecting only when its
// inspection is in band, else the out-of-band one; in deploying and
// validating, the one for the image's kind: set_os_agent), checks every step's
// needs once up front (a driver without clean fails before the node is
// touched, naming what is missing), and then for each step records it on
// the node (set_step) and runs its action, stopping at the first failure.
// A resumable flow (agent, virtual) found at a recorded provision_step after
// a restart continues there, so a node waiting for its OS to boot is not sent
// back to the ramdisk; the others start again from the top.
//
// set_step returns false when the operation no longer holds the node
// (aborted or timed out); the workflow then stops at once and reports `lost`.
//
// Thread: one run is one coroutine on the conductor's executor; a Workflow is
// made per operation and not shared.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/conductor/deploy_hooks.h"
#include "controller/model/node.h"
#include "controller/model/steps.h"
#include "drivers/driver.h"

namespace kiln {

struct StepOutcome {
  Status status;                          // ok, or why the state failed
  bool lost = false;                      // the node was taken away mid-way
  nlohmann::json inventory;               // set by inspecting
  nlohmann::json validation;              // report, set by burning_in / validating
  std::optional<PowerState> power_state;  // last power state observed
  std::string note;                       // e.g. "no profile: burn-in skipped"
  // Every report of burning_in / validating in attempt order: a numeric miss
  // is retried once (controller/model/validation.h), so there may be two.
  std::vector<nlohmann::json> validations;
};

// What an on-demand run leaves behind.
struct OnDemandOutcome {
  Result<nlohmann::json> report = Error(Code::kInternal, "validation did not run");  // or why there is none
  std::optional<PowerState> power_state;  // off once powered off at the end
  std::string power_error;                // why it could not be (for last_error)
};

using SetStep = std::function<asio::awaitable<bool>(std::string)>;
// Stores one report of the gate as it comes (`attempt` 1 or 2: the
// conductor's validation record, which the node's last_validation then
// names), so a flow that goes on after its validation (an image without
// kiln-agent is validated before the write) keeps the report even when
// kilnd stops before the state ends. Errors are the sink's to log.
using ReportSink = std::function<asio::awaitable<void>(nlohmann::json report, int attempt)>;

class Workflow {
 public:
  Workflow(const DriverRegistry& drivers, const SecretBox& secrets, Logger log)
      : drivers_(drivers), secrets_(secrets), log_(std::move(log)) {}

  // Runs the work of `state` for `node`. `still_held` may be empty (never lost).
  asio::awaitable<StepOutcome> run_state(const Node& node, ProvisionState state, const SetStep& set_step,
                                         const HeldCheck& still_held = HeldCheck());

  // The node's profile document for burning_in / validating (sent to the
  // driver in DriverTarget::profile; the gate reads its plans). `problem`:
  // why it could not be loaded (the node names a missing profile); the
  // validation then fails with it. Call before run_state.
  void set_profile(nlohmann::json doc, std::string problem = "") {
    profile_doc_ = std::move(doc);
    profile_problem_ = std::move(problem);
  }

  // Where write_config_drive reads the node's allocation (ConductorOptions::
  // tenant_access). Empty, or an allocation it does not find: the drive has
  // the hostname and network-config and no keys (logged).
  void set_tenant_access(TenantAccessLookup lookup) { tenant_access_ = std::move(lookup); }
  // What write_config_drive writes for a node deployed with a config drive
  // of its own (ConductorOptions::own_config_drive): that drive's keys, user
  // data and host name win over the allocation's. Empty: allocations only.
  void set_own_config_drive(OwnConfigDriveOf of) { own_config_drive_ = std::move(of); }
  // Where write_config_drive gets the deploy's phone-home URL
  // (ConductorOptions::phone_home). Empty: drives without phone_home.
  void set_phone_home(PhoneHomeLookup lookup) { phone_home_ = std::move(lookup); }
  // What wait_phone_home waits on (ConductorOptions::phone_home_wait).
  // Empty: an image without kiln-agent cannot be deployed (the step fails
  // saying so).
  void set_phone_home_wait(PhoneHomeWait wait) { phone_home_wait_ = std::move(wait); }
  // Whether the OS of the image being deployed runs kiln-agent
  // (Image::os_agent): picks the deploying and validating flows
  // (controller/model/steps.h). True unless told.
  void set_os_agent(bool os_agent) { os_agent_ = os_agent; }
  // Where each report of the gate goes at once (ConductorOptions has none:
  // the conductor sets it per operation). Empty: reports are only in the
  // outcome's `validations`.
  void set_report_sink(ReportSink sink) { report_sink_ = std::move(sink); }

  // Performs a power action and returns the power state observed after it.
  asio::awaitable<Result<PowerState>> power(const Node& node, PowerAction action);

  // The on-demand validation of an agent-driven node at rest
  // (on_demand_flow(): boot the ramdisk, wait for the agent, run `plan` once
  // with the profile of set_profile, no gate, no state change). A step that
  // fails or runs past `timeout` ends the run with "on-demand validation
  // failed at step S: ..."; the power off and forgetting the agent are
  // attempted in every case.
  asio::awaitable<OnDemandOutcome> run_on_demand(const Node& node, ValidationPlan plan, const SetStep& set_step,
                                                 const HeldCheck& still_held, std::chrono::milliseconds timeout);

 private:
  // One run of a flow: the driver, its target and the outcome so far.
  struct Run {
    Driver* driver = nullptr;
    DriverTarget target;
    StepOutcome out;
    const SetStep* set_step = nullptr;
    std::string profile;      // the node's profile name ("" = none: validation is a note)
    std::string image;        // deploying
    std::string node_name;    // the config drive's hostname
    std::string last_validation;  // the node's, as the state began
    ValidationPlan plan = ValidationPlan::kQuick;  // on-demand validation
    std::string failed_step;  // the step that stopped the flow, if one did
    std::optional<OwnConfigDrive> own_drive;  // deploying: the node's own config drive
  };
  using Action = asio::awaitable<bool> (Workflow::*)(Run&);

  // Fills run.driver and run.target (with the decrypted password).
  Status resolve(const Node& node, Run& run) const;

  // The executor: runs `flow` from `resume_step` (when the flow resumes).
  asio::awaitable<void> execute(Run& run, const Flow& flow, std::string resume_step);
  asio::awaitable<bool> run_step(Run& run, StepId id);
  static Action action(StepId id);

  // The hand-off gate around the driver's validate: full for burn-in, quick
  // before hand-off.
  asio::awaitable<bool> gate(Run& run, ValidationPlan plan);

  // One action per step (StepId); each returns false when the flow must
  // stop, with run.out saying why. (One awaitable<bool> per step, and no
  // switch with locals in a coroutine: docs/coroutines.md.)
  asio::awaitable<bool> verify_bmc(Run& run);
  asio::awaitable<bool> read_power(Run& run);
  asio::awaitable<bool> inspect(Run& run);
  asio::awaitable<bool> set_boot_pxe(Run& run);
  asio::awaitable<bool> boot_ramdisk(Run& run);
  asio::awaitable<bool> power_on(Run& run);
  asio::awaitable<bool> power_on_or_reboot(Run& run);
  asio::awaitable<bool> power_off(Run& run);
  asio::awaitable<bool> reboot(Run& run);
  asio::awaitable<bool> wait_agent(Run& run);
  asio::awaitable<bool> clean(Run& run);
  asio::awaitable<bool> burn_in(Run& run);
  asio::awaitable<bool> write_image(Run& run);
  asio::awaitable<bool> write_config_drive(Run& run);
  asio::awaitable<bool> set_boot_disk(Run& run);
  asio::awaitable<bool> wait_boot(Run& run);
  asio::awaitable<bool> validate(Run& run);
  asio::awaitable<bool> define_domain(Run& run);
  asio::awaitable<bool> teardown(Run& run);
  asio::awaitable<bool> skip_burn_in(Run& run);
  asio::awaitable<bool> validate_once(Run& run);
  asio::awaitable<bool> wait_phone_home(Run& run);
  asio::awaitable<bool> validated_in_ramdisk(Run& run);
  asio::awaitable<bool> no_in_band_validation(Run& run);

  const DriverRegistry& drivers_;
  const SecretBox& secrets_;
  Logger log_;
  nlohmann::json profile_doc_;
  std::string profile_problem_;
  TenantAccessLookup tenant_access_;
  OwnConfigDriveOf own_config_drive_;
  PhoneHomeLookup phone_home_;
  PhoneHomeWait phone_home_wait_;
  ReportSink report_sink_;
  bool os_agent_ = true;
};

}  // namespace kiln
