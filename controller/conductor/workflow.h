#pragma once
// Workflow: what the conductor does inside each transient state, in driver
// calls. It knows the steps (set boot device, power on, clean, ...) but not
// the lock, the store or the state table: the conductor hands it a node and a
// state, and gets back an outcome to record. Keeping this apart keeps the
// conductor's locking readable and lets each state's steps read top to bottom.
//
//   verifying   management.verify, read power state
//   inspecting  inspect (out of band)
//   cleaning    boot pxe, power on, clean, power off
//   burning_in  power on, validate("burn_in"), power off
//   deploying   boot pxe, power on, deploy(image), boot disk (persistent), reboot
//   validating  validate("quick")
//
// Drivers with an AgentInterface (redfish, ipmi: in-band work on kiln-agent,
// docs/agent-protocol.md) take the agent's path instead; step names are the
// contract's (the boot script reads set_boot_disk/reboot/wait_boot):
//
//   inspecting  set_boot_pxe, power_on, wait_agent, inspect, power_off
//               (out of band as above when the driver's inspect is not in_band)
//   cleaning    set_boot_pxe, power_on, wait_agent, wipe (the ramdisk stays up)
//   burning_in  burn_in (plan "full"; skipped with a note without a profile), power_off
//   deploying   set_boot_pxe, power_on, wait_agent, write_image, set_boot_disk,
//               reboot, wait_boot (the OS's agent looks up)
//   validating  validate (plan "quick" via the OS's agent; a note without a profile)
//
// set_boot_pxe first forgets the node's earlier agent; power_on reboots a node
// that is already on (an undeploy). A resumed operation (kilnd restarted)
// continues at the node's recorded provision_step rather than from the top,
// so a node waiting for its OS to boot is not sent back to the ramdisk.
//
// Between steps it calls set_step(name), which records progress on the node
// and returns false when the operation no longer holds the node (aborted or
// timed out); the workflow then stops at once and reports `lost`.

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
#include "controller/model/node.h"
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

using SetStep = std::function<asio::awaitable<bool>(std::string)>;
// False once the operation no longer holds the node; cheap enough to call
// every few hundred milliseconds (agent waits poll it).
using HeldCheck = std::function<asio::awaitable<bool>()>;

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

  // Performs a power action and returns the power state observed after it.
  asio::awaitable<Result<PowerState>> power(const Node& node, PowerAction action);

 private:
  // One run of a state's work: the driver, its target and the outcome so far.
  struct Run {
    Driver* driver = nullptr;
    DriverTarget target;
    StepOutcome out;
    const SetStep* set_step = nullptr;
    std::string profile;
    // Agent flows: the step list of the state and the node's recorded step
    // (steps before it were done by an earlier process and are skipped).
    const std::vector<std::string>* flow = nullptr;
    std::string resume_step;
  };

  // Fills run.driver and run.target (with the decrypted password).
  Status resolve(const Node& node, Run& run) const;

  // Steps. Each returns false when the state must stop (run.out says why).
  asio::awaitable<bool> step(Run& run, const char* name);
  asio::awaitable<bool> power_to(Run& run, PowerAction action);
  asio::awaitable<bool> boot(Run& run, BootDevice device, bool persistent);
  asio::awaitable<bool> validate(Run& run, const char* plan);

  // One coroutine per transient state. (No switch with locals in a coroutine:
  // GCC 12 miscompiles non-trivial locals in case blocks.)
  asio::awaitable<void> verifying(Run& run);
  asio::awaitable<void> inspecting(Run& run);
  asio::awaitable<void> cleaning(Run& run);
  asio::awaitable<void> burning_in(Run& run);
  asio::awaitable<void> deploying(Run& run, const std::string& image);

  // The agent's path (drivers with an AgentInterface).
  static bool todo(const Run& run, const char* step);
  bool can_boot_agent(Run& run);
  asio::awaitable<bool> boot_ramdisk(Run& run);  // set_boot_pxe, after forgetting the old agent
  asio::awaitable<bool> power_on_or_reboot(Run& run);
  asio::awaitable<bool> wait_agent(Run& run, const char* step, AgentPhase phase);
  asio::awaitable<void> agent_inspecting(Run& run);
  asio::awaitable<void> agent_cleaning(Run& run);
  asio::awaitable<void> agent_burning_in(Run& run);
  asio::awaitable<void> agent_deploying(Run& run, const std::string& image);
  asio::awaitable<void> agent_validating(Run& run);

  // Virtual nodes (kind virtual, issue 7): the driver's deploy places the
  // node on a hypervisor and defines and starts its domain; there is no PXE
  // stage, the OS's agent reports in (wait_boot). Undeploy's cleaning is the
  // teardown (domain, volume, port, capacity); burning_in has nothing to burn
  // in (the VM is gone until the next deploy, which validates it) and is a
  // note. validating is the agent's path as for bare metal.
  //   deploying   define_domain, wait_boot
  //   cleaning    teardown
  //   burning_in  burn_in (skipped, with a note)
  asio::awaitable<void> virtual_deploying(Run& run, const std::string& image);
  asio::awaitable<void> virtual_cleaning(Run& run);

  const DriverRegistry& drivers_;
  const SecretBox& secrets_;
  Logger log_;
  nlohmann::json profile_doc_;
  std::string profile_problem_;
};

}  // namespace kiln
