#pragma once
// MachineBackend: the machines a virtual BMC stands in front of.
//
// kiln-vbmc's protocol front-ends (RedfishService, IpmiBmc) speak to
// machines only through this interface: list them, read their power and boot
// override, apply a reset, change the boot override, describe their hardware.
// Three back-ends implement it: LibvirtBackend (one machine per libvirt
// domain), MockupBackend (the ComputerSystems of a captured Redfish tree,
// with power and boot kept in memory) and FleetBackend (fleet mode's
// in-memory machines).
//
// Reset types use the Redfish names, which IPMI chassis control maps onto
// one to one (power up = On, power down = ForceOff, soft = GracefulShutdown,
// hard reset = ForceRestart, power cycle = PowerCycle, diag = Nmi).
//
// Threading: every method is a coroutine that may be called concurrently
// from any I/O thread; implementations guard their own state and never block
// the caller (libvirt runs on a pool).

#include <cstdint>
#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/result.h"

namespace kiln::vbmc {

namespace asio = boost::asio;

struct BootOverride {
  std::string target = "None";       // None | Pxe | Hdd | Cd | UefiHttp ...
  std::string enabled = "Disabled";  // Disabled | Once | Continuous
  std::string mode = "UEFI";         // UEFI | Legacy
};

struct MachineState {
  std::string id;    // stable id used in URIs (libvirt: the domain UUID)
  std::string name;  // display name (libvirt: the domain name)
  std::string uuid;
  bool powered_on = false;
  BootOverride boot;
};

struct MachineDisk {
  std::string name;      // "vda"
  std::string source;    // backing file or device, may be empty
  int64_t size_bytes = 0;  // 0 when unknown
};

struct MachineHardware {
  int cpus = 0;
  int64_t memory_mib = 0;
  std::vector<MachineDisk> disks;
  std::vector<std::string> macs;  // lowercase
};

// The Redfish ResetType values every back-end accepts.
const std::vector<std::string>& standard_reset_types();
// Targets a boot override may name.
bool is_known_boot_target(const std::string& target);

class MachineBackend {
 public:
  virtual ~MachineBackend() = default;
  // Ids of all machines, in a stable order.
  virtual asio::awaitable<Result<std::vector<std::string>>> machines() = 0;
  // Errors: kNotFound for an unknown id; kDriverError when the hypervisor fails.
  virtual asio::awaitable<Result<MachineState>> state(std::string id) = 0;
  // Applies a Redfish ResetType. Errors: kNotFound, kInvalidArgument (unknown
  // type), kDriverError (the hypervisor's words).
  virtual asio::awaitable<Status> reset(std::string id, std::string reset_type) = 0;
  // Sets the boot override (all three fields). Errors as reset().
  virtual asio::awaitable<Status> set_boot(std::string id, BootOverride boot) = 0;
  virtual asio::awaitable<Result<MachineHardware>> hardware(std::string id) = 0;
};

}  // namespace kiln::vbmc
