#pragma once
// What a driver can do for a node, split into capabilities as Ironic's
// drivers/base.py does: power, management (verify + boot device), inspect,
// deploy, clean, validate. A Driver bundles one implementation of each; any
// may be null when the driver cannot do it (the conductor then fails the step
// with "driver X cannot Y").
//
// Every capability has a cheap validate() that does no I/O and checks the
// node's BMC fields, so bad input is refused at the API with a field name
// instead of failing later in a workflow.
//
// Async contract: operations are Asio coroutines run on kilnd's I/O executor.
// They must not block; blocking libraries (libvirt) run on a BlockingPool
// inside the driver. Every network wait has a deadline; a driver returns
// kTimeout, kDriverError (with the BMC's own words), or kUnauthenticated
// (credentials rejected) as values and never throws.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/result.h"
#include "drivers/bmc.h"
#include "drivers/power.h"
#include "drivers/validation_plan.h"

namespace kiln {

namespace asio = boost::asio;

// Everything a driver gets about one node: its id and BMC fields, with the
// password already decrypted. Lives only for the duration of a call.
// DriverTarget::still_held's type: false once the operation lost the node.
using HeldFn = std::function<asio::awaitable<bool>()>;

// `inner` (empty: always held) that also turns false at `deadline`, so a wait
// on an agent that went quiet ends even where no state timeout applies. The
// caller tells a deadline from a lost node by looking at the clock.
HeldFn held_until(HeldFn inner, std::chrono::steady_clock::time_point deadline);

struct DriverTarget {
  std::string node_id;
  BmcInfo bmc;
  std::string password;  // plaintext; never log it
  std::string boot_mode; // uefi | bios
  std::vector<std::string> macs;
  // False once the operation driving this call no longer holds the node
  // (aborted, timed out). Long waits (an agent calling back) poll it at most
  // ~1 s apart and give up with kConflict. Empty: the caller never loses it.
  HeldFn still_held;
  // Validation: the node's hardware profile document (schemas/profile.schema.json;
  // the agent reads it as agent/validate/checks/profile.h describes). Null when
  // the node has none (its validation is skipped before any driver call).
  nlohmann::json profile;
  // The node's allocation ("" = none): validation runs nccl_multinode across
  // the allocation's nodes (MultinodeValidation, drivers/agent/agent_driver.h).
  std::string allocation;
};

class PowerInterface {
 public:
  virtual ~PowerInterface() = default;
  virtual Status validate(const BmcInfo& bmc) const = 0;
  virtual asio::awaitable<Result<PowerState>> get_power_state(const DriverTarget& t) = 0;
  // Requests `action` and waits until the resulting state is observed or the
  // driver's deadline passes.
  virtual asio::awaitable<Status> set_power_state(const DriverTarget& t, PowerAction action) = 0;
};

class ManagementInterface {
 public:
  virtual ~ManagementInterface() = default;
  virtual Status validate(const BmcInfo& bmc) const = 0;
  // Proves the BMC is reachable, the credentials work and the system exists.
  virtual asio::awaitable<Status> verify(const DriverTarget& t) = 0;
  virtual asio::awaitable<Status> set_boot_device(const DriverTarget& t, BootDevice device,
                                                  bool persistent) = 0;
};

class InspectInterface {
 public:
  virtual ~InspectInterface() = default;
  // True when inspect(t) runs on kiln-agent, so the workflow must boot the
  // node into the deploy ramdisk first (Driver::agent). Out-of-band: false.
  virtual bool in_band(const DriverTarget& t) const {
    (void)t;
    return false;
  }
  // Returns the inventory JSON (schema in schemas/inventory.schema.json).
  virtual asio::awaitable<Result<nlohmann::json>> inspect(const DriverTarget& t) = 0;
};

struct DeployRequest {
  std::string image;  // image id or name; may be empty for drivers that need none
};

class DeployInterface {
 public:
  virtual ~DeployInterface() = default;
  virtual asio::awaitable<Status> deploy(const DriverTarget& t, const DeployRequest& req) = 0;
  virtual asio::awaitable<Status> undeploy(const DriverTarget& t) = 0;
  // After deploy: writes `iso` (the config drive, an ISO 9660 image labelled
  // cidata) to a new partition at the end of the deployed disk. Drivers that
  // write no disk of their own keep this default, kUnprocessable; the flows
  // ask for it only with kiln-agent (controller/model/steps.cc).
  virtual asio::awaitable<Status> write_config_drive(const DriverTarget& t, const std::string& iso) {
    (void)t;
    (void)iso;
    co_return Error(Code::kUnprocessable, "this driver cannot write a config drive");
  }
};

class CleanInterface {
 public:
  virtual ~CleanInterface() = default;
  virtual asio::awaitable<Status> clean(const DriverTarget& t) = 0;
};

// Plans (drivers/validation_plan.h): full (burn-in, after cleaning) and quick
// (before hand-off); either on demand.
class ValidateInterface {
 public:
  virtual ~ValidateInterface() = default;
  // Returns the report JSON; a report whose checks failed is still a value:
  // the caller reads report["result"] ("pass" | "fail").
  virtual asio::awaitable<Result<nlohmann::json>> validate(const DriverTarget& t, ValidationPlan plan) = 0;
};

// In-band work (Ironic's "agent" interfaces): when a Driver has one, its
// clean, deploy and validate capabilities (and inspect when in_band()) run on
// kiln-agent, which the node boots from the network (the deploy ramdisk) or
// runs in its deployed OS. The workflow boots the node and waits for the
// agent through this interface before calling them. Contract:
// docs/agent-protocol.md.
enum class AgentPhase { kRamdisk, kOs };

class AgentInterface {
 public:
  virtual ~AgentInterface() = default;
  // Forgets the node's agent (sessions, pending command) before the node is
  // booted afresh, so an agent of an earlier boot is not taken for the new one.
  virtual asio::awaitable<Status> forget(const DriverTarget& t) = 0;
  // Waits until the node's agent has looked up in `phase` (a session opened
  // before a kilnd restart counts). kConflict when t.still_held says the
  // operation lost the node; kUnavailable when kilnd is shutting down.
  virtual asio::awaitable<Status> wait_for_agent(const DriverTarget& t, AgentPhase phase) = 0;
};

struct Driver {
  std::string name;
  std::unique_ptr<PowerInterface> power;
  std::unique_ptr<ManagementInterface> management;
  std::unique_ptr<InspectInterface> inspect;
  std::unique_ptr<DeployInterface> deploy;
  std::unique_ptr<CleanInterface> clean;
  std::unique_ptr<ValidateInterface> validate;
  std::unique_ptr<AgentInterface> agent;  // null: everything is out of band
};

// Drivers by name. Built in main.cc; read-only afterwards (safe across threads).
class DriverRegistry {
 public:
  void add(std::unique_ptr<Driver> driver);
  // Null when no driver of that name is built in.
  Driver* find(std::string_view name) const;
  std::vector<std::string> names() const;
  // Known driver names, including those this build lacks (redfish, ipmi,
  // libvirt before their issues land), so enrollment is accepted and `manage`
  // fails with a clear reason rather than the API rejecting a valid node.
  static bool is_known_driver_name(std::string_view name);

 private:
  std::vector<std::unique_ptr<Driver>> drivers_;
};

}  // namespace kiln
