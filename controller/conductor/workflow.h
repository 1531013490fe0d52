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
// Between steps it calls set_step(name), which records progress on the node
// and returns false when the operation no longer holds the node (aborted or
// timed out); the workflow then stops at once and reports `lost`.

#include <functional>
#include <optional>
#include <string>
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
};

using SetStep = std::function<asio::awaitable<bool>(std::string)>;

class Workflow {
 public:
  Workflow(const DriverRegistry& drivers, const SecretBox& secrets, Logger log)
      : drivers_(drivers), secrets_(secrets), log_(std::move(log)) {}

  // Runs the work of `state` for `node`.
  asio::awaitable<StepOutcome> run_state(const Node& node, ProvisionState state, const SetStep& set_step);

  // Performs a power action and returns the power state observed after it.
  asio::awaitable<Result<PowerState>> power(const Node& node, PowerAction action);

 private:
  // One run of a state's work: the driver, its target and the outcome so far.
  struct Run {
    Driver* driver = nullptr;
    DriverTarget target;
    StepOutcome out;
    const SetStep* set_step = nullptr;
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

  const DriverRegistry& drivers_;
  const SecretBox& secrets_;
  Logger log_;
};

}  // namespace kiln
