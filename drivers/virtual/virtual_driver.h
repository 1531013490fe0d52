#pragma once
// The virtual-machine driver's deploy and clean capabilities: a virtual
// node's "deploy" is making its machine (place it on a host, give it a disk
// from the image, define and start the domain) and its "clean" and
// "undeploy" are removing that machine. How that is done (placement in the
// store, libvirt calls on the host) is the controller's (controller/hosts:
// VirtualMachines implements VirtualMachineLifecycle); this driver only maps
// the capabilities onto the lifecycle. Power and management stay with the
// libvirt driver (drivers/libvirt/libvirt_driver.h), validation and the OS
// agent with the in-band driver (drivers/agent/agent_driver.h).

#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>

#include "common/result.h"
#include "drivers/driver.h"

namespace kiln {

// A virtual node's machine, from placement to teardown. Both calls are
// idempotent (a resumed or retried operation finishes the job without
// booking twice or freeing twice) and return the failure as a value; they run
// on an I/O thread and must not block it.
class VirtualMachineLifecycle {
 public:
  virtual ~VirtualMachineLifecycle() = default;
  // Places, defines and starts the node's machine with `image` on its disk.
  virtual asio::awaitable<Status> provision(std::string node_id, std::string image) = 0;
  // Destroys the node's machine and frees what it held.
  virtual asio::awaitable<Status> teardown(std::string node_id) = 0;
};

// Sets `driver`'s deploy (provision; undeploy tears down) and clean
// (teardown) capabilities to `lifecycle`, which must outlive the driver.
void add_virtual_capabilities(Driver& driver, VirtualMachineLifecycle& lifecycle);

}  // namespace kiln
