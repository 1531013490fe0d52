#pragma once
// The libvirt driver (bmc.driver = "libvirt"): power and management of a
// virtual node's domain on its hypervisor host.
//
//   power      on = virDomainCreate, off = virDomainDestroy, soft_off =
//              virDomainShutdown then wait (60 s) for shut off, reboot =
//              virDomainReset (a running domain) or create (a stopped one);
//              get_power_state from virDomainGetState
//   management verify = the host is connected and the domain exists;
//              set_boot_device is accepted and ignored (a virtual node always
//              boots its own disk: there is no PXE stage)
//
// Where a node's domain lives is not in its BMC block but in the store (the
// node's VirtualMachine): a DomainDirectory answers that. A node without a
// VirtualMachine has no domain and is off. A VirtualMachine whose domain is
// gone, or whose host is unreachable, is an error the power sync counts and,
// past its threshold, turns into the node's fault with the reason.
//
// Deploy and clean (placement, volumes, define/undefine) are the virtual
// driver's (drivers/virtual, over the controller's VirtualMachines), added to
// this Driver in main.cc; validation and the OS agent are the in-band
// driver's (drivers/agent).
//
// Threading: libvirt calls run on the BlockingPool given here, never on I/O threads.

#include <memory>
#include <optional>
#include <string>

#include "common/blocking_pool.h"
#include "common/log.h"
#include "drivers/driver.h"
#include "drivers/libvirt/connection.h"

namespace kiln::libvirt {

struct DomainLocation {
  std::string host_name;
  std::string domain;
  ConnPtr conn;  // the host's open connection
};

class DomainDirectory {
 public:
  virtual ~DomainDirectory() = default;
  // Blocking (runs on the libvirt pool). nullopt: the node has no domain.
  // kUnavailable naming the host when it is not connected.
  virtual Result<std::optional<DomainLocation>> locate(const std::string& node_id) = 0;
};

// libvirt domain state -> power state (running/blocked/paused/pmsuspended = on).
PowerState power_state_of(int virDomainState);

// `pool` and `directory` must outlive the driver.
std::unique_ptr<Driver> make_libvirt_driver(BlockingPool& pool, DomainDirectory& directory, Logger log);

}  // namespace kiln::libvirt
