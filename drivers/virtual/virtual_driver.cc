#include "drivers/virtual/virtual_driver.h"

#include <memory>

namespace kiln {

namespace {

class VirtualDeploy final : public DeployInterface {
 public:
  explicit VirtualDeploy(VirtualMachineLifecycle& vms) : vms_(vms) {}
  asio::awaitable<Status> deploy(const DriverTarget& t, const DeployRequest& req) override {
    std::string node_id = t.node_id;
    std::string image = req.image;
    co_return co_await vms_.provision(node_id, image);
  }
  asio::awaitable<Status> undeploy(const DriverTarget& t) override {
    std::string node_id = t.node_id;
    co_return co_await vms_.teardown(node_id);
  }

 private:
  VirtualMachineLifecycle& vms_;
};

class VirtualClean final : public CleanInterface {
 public:
  explicit VirtualClean(VirtualMachineLifecycle& vms) : vms_(vms) {}
  asio::awaitable<Status> clean(const DriverTarget& t) override {
    std::string node_id = t.node_id;
    co_return co_await vms_.teardown(node_id);
  }

 private:
  VirtualMachineLifecycle& vms_;
};

}  // namespace

void add_virtual_capabilities(Driver& driver, VirtualMachineLifecycle& lifecycle) {
  driver.deploy = std::make_unique<VirtualDeploy>(lifecycle);
  driver.clean = std::make_unique<VirtualClean>(lifecycle);
}

}  // namespace kiln
