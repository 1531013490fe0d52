#pragma once
// VirtualMachines: a virtual node's machine from placement to teardown, the
// lifecycle behind the virtual-machine driver's deploy and clean capabilities
// (drivers/virtual/virtual_driver.h, add_virtual_capabilities).
//
// provision (deploy, workflow step define_domain), every step idempotent so
// a resumed or retried deploy finishes the job without booking twice:
//   1. the flavour: the node's profile's `virtual` block
//   2. place: NodeStore::place_virtual_node books CPUs/GPUs/memory in one
//      transaction on the requested host, or the first that fits (409
//      naming what is short on each host)
//   3. the NIC's MAC (derived from the node id) becomes a port of the node,
//      so the OS agent's lookup by MAC finds it (and dnsmasq learns it)
//   4. storage pool (created as a dir pool when absent) and a qcow2 volume
//      backed by the image's file (raw or qcow2; the file must be readable
//      at that path on the host)
//   5. domain XML (drivers/libvirt/domain_xml.h), define, start
//
// teardown (clean; undeploy runs it in cleaning), also idempotent and
// ordered so a failure half-way never frees capacity still in use: destroy
// and undefine the domain (with its NVRAM), delete the volume, delete the
// port, and only then release the reservations and the VirtualMachine row
// in one transaction. Cloud-init data is generated per request (nocloud.h),
// so there is nothing of it to remove.
//
// Threading: blocking work runs on the `virt` BlockingPool.

#include <memory>
#include <string>

#include "common/blocking_pool.h"
#include "common/log.h"
#include "controller/hosts/host_registry.h"
#include "drivers/driver.h"
#include "drivers/virtual/virtual_driver.h"

namespace kiln {

class NodeStore;  // controller/store/store.h

class VirtualMachines final : public VirtualMachineLifecycle {
 public:
  // The whole store: a guest books its host's capacity, gets its node and
  // ports written, and reads its image and profile.
  VirtualMachines(NodeStore& store, BlockingPool& virt, HostRegistry& hosts, Logger log)
      : store_(store), virt_(virt), hosts_(hosts), log_(std::move(log)) {}

  // Base URL guests reach kilnd at (the NoCloud seed URL is built from it).
  void set_boot_url(std::string url) { boot_url_ = std::move(url); }

  asio::awaitable<Status> provision(std::string node_id, std::string image) override;
  asio::awaitable<Status> teardown(std::string node_id) override;

  // Blocking bodies (tests may call them on their own thread).
  Status provision_blocking(const std::string& node_id, const std::string& image);
  Status teardown_blocking(const std::string& node_id);

  // The domain name of a node's VM.
  static std::string domain_name(const std::string& node_id) { return "kiln-" + node_id; }

 private:
  NodeStore& store_;
  BlockingPool& virt_;
  HostRegistry& hosts_;
  Logger log_;
  std::string boot_url_;
};

}  // namespace kiln
