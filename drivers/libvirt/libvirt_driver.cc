#include "drivers/libvirt/libvirt_driver.h"

#include <libvirt/libvirt.h>

#include <chrono>
#include <thread>

namespace kiln::libvirt {
namespace {

struct DomainRef {
  virDomainPtr d = nullptr;
  ~DomainRef() {
    if (d) virDomainFree(d);
  }
};

Result<DomainLocation> require(DomainDirectory& dir, const std::string& node_id) {
  Result<std::optional<DomainLocation>> loc = dir.locate(node_id);
  if (!loc) return loc.take_error();
  if (!*loc) return Error(Code::kConflict, "virtual node " + node_id + " has no domain (deploy it first)");
  return **loc;
}

Status lookup(const DomainLocation& loc, DomainRef& ref) {
  ref.d = virDomainLookupByName(loc.conn.get(), loc.domain.c_str());
  if (!ref.d)
    return Error(Code::kDriverError, "domain " + loc.domain + " vanished from host " + loc.host_name);
  return ok_status();
}

Result<PowerState> read_state(DomainDirectory& dir, const std::string& node_id) {
  Result<std::optional<DomainLocation>> loc = dir.locate(node_id);
  if (!loc) return loc.take_error();
  if (!*loc) return PowerState::kOff;
  DomainRef ref;
  if (Status s = lookup(**loc, ref); !s) return s.take_error();
  int state = 0, reason = 0;
  if (virDomainGetState(ref.d, &state, &reason, 0) < 0)
    return Error(Code::kDriverError, last_error("get state of domain " + (*loc)->domain));
  return power_state_of(state);
}

Status apply(DomainDirectory& dir, const std::string& node_id, PowerAction action) {
  Result<DomainLocation> loc = require(dir, node_id);
  if (!loc) return loc.take_error();
  DomainRef ref;
  if (Status s = lookup(*loc, ref); !s) return s;
  int active = virDomainIsActive(ref.d);
  if (active < 0) return Error(Code::kDriverError, last_error("query domain " + loc->domain));
  int rc = 0;
  std::string what;
  if (action == PowerAction::kOn) {
    what = "start";
    if (!active) rc = virDomainCreate(ref.d);
  } else if (action == PowerAction::kOff) {
    what = "destroy";
    if (active) rc = virDomainDestroy(ref.d);
  } else if (action == PowerAction::kReboot) {
    what = "reset";
    rc = active ? virDomainReset(ref.d, 0) : virDomainCreate(ref.d);
  } else {
    what = "shut down";
    if (active) {
      rc = virDomainShutdown(ref.d);
      for (int i = 0; rc == 0 && i < 600; ++i) {
        if (virDomainIsActive(ref.d) == 0) return ok_status();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      if (rc == 0) return Error(Code::kTimeout, "domain " + loc->domain + " did not shut down within 60s");
    }
  }
  if (rc < 0) return Error(Code::kDriverError, last_error(what + " domain " + loc->domain));
  return ok_status();
}

class LibvirtPower final : public PowerInterface {
 public:
  LibvirtPower(BlockingPool& pool, DomainDirectory& dir) : pool_(pool), dir_(dir) {}
  Status validate(const BmcInfo& bmc) const override {
    (void)bmc;  // the domain is found through the node's VirtualMachine, not its BMC block
    return ok_status();
  }
  asio::awaitable<Result<PowerState>> get_power_state(const DriverTarget& t) override {
    std::string node_id = t.node_id;
    DomainDirectory* dir = &dir_;
    auto call = [dir, node_id] { return read_state(*dir, node_id); };  // named: GCC 12 (docs/coroutines.md)
    co_return co_await pool_.run(call);
  }
  asio::awaitable<Status> set_power_state(const DriverTarget& t, PowerAction action) override {
    std::string node_id = t.node_id;
    DomainDirectory* dir = &dir_;
    auto call = [dir, node_id, action] { return apply(*dir, node_id, action); };
    co_return co_await pool_.run(call);
  }

 private:
  BlockingPool& pool_;
  DomainDirectory& dir_;
};

class LibvirtManagement final : public ManagementInterface {
 public:
  LibvirtManagement(BlockingPool& pool, DomainDirectory& dir) : pool_(pool), dir_(dir) {}
  Status validate(const BmcInfo& bmc) const override {
    (void)bmc;
    return ok_status();
  }
  asio::awaitable<Status> verify(const DriverTarget& t) override {
    std::string node_id = t.node_id;
    DomainDirectory* dir = &dir_;
    auto call = [dir, node_id]() -> Status {
      Result<std::optional<DomainLocation>> loc = dir->locate(node_id);
      if (!loc) return loc.take_error();
      if (!*loc) return ok_status();  // no domain yet: nothing to check but the node record
      DomainRef ref;
      return lookup(**loc, ref);
    };
    co_return co_await pool_.run(call);
  }
  asio::awaitable<Status> set_boot_device(const DriverTarget& t, BootDevice device, bool persistent) override {
    (void)t;
    (void)device;
    (void)persistent;
    co_return ok_status();
  }

 private:
  BlockingPool& pool_;
  DomainDirectory& dir_;
};

}  // namespace

PowerState power_state_of(int s) {
  switch (s) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:
    case VIR_DOMAIN_PAUSED:
    case VIR_DOMAIN_PMSUSPENDED: return PowerState::kOn;
    case VIR_DOMAIN_SHUTOFF:
    case VIR_DOMAIN_SHUTDOWN:
    case VIR_DOMAIN_CRASHED: return PowerState::kOff;
    default: return PowerState::kUnknown;
  }
}

std::unique_ptr<Driver> make_libvirt_driver(BlockingPool& pool, DomainDirectory& directory, Logger log) {
  (void)log;
  auto d = std::make_unique<Driver>();
  d->name = "libvirt";
  d->power = std::make_unique<LibvirtPower>(pool, directory);
  d->management = std::make_unique<LibvirtManagement>(pool, directory);
  return d;
}

}  // namespace kiln::libvirt
