#include "tools/vbmc/libvirt_backend.h"

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>

#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "tools/vbmc/domain_xml.h"

namespace kiln::vbmc {

namespace {

std::string last_error(const char* what) {
  const char* m = virGetLastErrorMessage();
  return std::string("libvirt: ") + what + ": " + (m ? m : "unknown error");
}

struct DomainRef {
  virDomainPtr d = nullptr;
  ~DomainRef() {
    if (d) virDomainFree(d);
  }
};

// Runs f() on `pool` and resumes the caller on its own executor with the
// result. The initiation is a named local (never a temporary inside the
// co_await expression: GCC 12 destroys such closures twice).
template <typename R>
asio::awaitable<R> offload(asio::thread_pool& pool, std::function<R()> f) {
  const asio::any_io_executor caller = co_await asio::this_coro::executor;
  std::optional<R> out;
  std::exception_ptr failure;
  auto initiation = [&pool, &f, &out, &failure, caller](auto handler) {
    asio::post(pool, [&f, &out, &failure, caller, handler = std::move(handler)]() mutable {
      try {
        out.emplace(f());
      } catch (...) {
        failure = std::current_exception();
      }
      asio::post(caller, [handler = std::move(handler)]() mutable { handler(); });
    });
  };
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(initiation, asio::use_awaitable);
  if (failure) std::rethrow_exception(failure);
  co_return std::move(*out);
}

}  // namespace

struct LibvirtBackend::Impl {
  virConnectPtr conn = nullptr;
  std::mutex mu;                              // guards overrides
  std::map<std::string, BootOverride> overrides;  // what clients asked, by domain UUID

  Result<virDomainPtr> lookup(const std::string& id) {
    virDomainPtr d = virDomainLookupByUUIDString(conn, id.c_str());
    if (!d) return Error(Code::kNotFound, "no domain with UUID " + id);
    return d;
  }

  Result<std::vector<std::string>> list() {
    virDomainPtr* doms = nullptr;
    const int n = virConnectListAllDomains(conn, &doms, 0);
    if (n < 0) return Error(Code::kDriverError, last_error("list domains"));
    std::vector<std::pair<std::string, std::string>> named;  // name, uuid
    for (int i = 0; i < n; ++i) {
      char uuid[VIR_UUID_STRING_BUFLEN];
      if (virDomainGetUUIDString(doms[i], uuid) == 0) {
        const char* name = virDomainGetName(doms[i]);
        named.emplace_back(name ? name : "", uuid);
      }
      virDomainFree(doms[i]);
    }
    std::free(doms);
    std::sort(named.begin(), named.end());
    std::vector<std::string> out;
    for (const auto& p : named) out.push_back(p.second);
    return out;
  }

  Result<std::string> xml(virDomainPtr d, unsigned flags) {
    char* x = virDomainGetXMLDesc(d, flags);
    if (!x) return Error(Code::kDriverError, last_error("get domain XML"));
    std::string out(x);
    std::free(x);
    return out;
  }

  Result<MachineState> state(const std::string& id) {
    auto d = lookup(id);
    if (!d) return d.take_error();
    DomainRef ref{*d};
    MachineState s;
    s.id = id;
    s.uuid = id;
    const char* name = virDomainGetName(ref.d);
    s.name = name ? name : id;
    int st = 0, reason = 0;
    if (virDomainGetState(ref.d, &st, &reason, 0) < 0) {
      return Error(Code::kDriverError, last_error("get domain state"));
    }
    s.powered_on = st == VIR_DOMAIN_RUNNING || st == VIR_DOMAIN_BLOCKED || st == VIR_DOMAIN_PAUSED ||
                   st == VIR_DOMAIN_PMSUSPENDED;
    auto x = xml(ref.d, VIR_DOMAIN_XML_INACTIVE);
    if (!x) return x.take_error();
    const DomainXmlInfo info = parse_domain_xml(*x);
    const std::string first = info.boot_devs.empty() ? "hd" : info.boot_devs.front();
    s.boot.target = first == "network" ? "Pxe" : first == "cdrom" ? "Cd" : first == "fd" ? "Floppy" : "Hdd";
    s.boot.enabled = "Continuous";
    s.boot.mode = info.uefi ? "UEFI" : "Legacy";
    std::lock_guard<std::mutex> lock(mu);
    auto it = overrides.find(id);
    if (it != overrides.end()) {
      s.boot.enabled = it->second.enabled;
      s.boot.mode = it->second.mode;
      if (it->second.target == "None") s.boot.target = "None";
    }
    return s;
  }

  // Whether the running domain boots in another order than its persistent definition.
  Result<bool> boot_order_changed(virDomainPtr d) {
    auto live = xml(d, 0);
    if (!live) return live.take_error();
    auto persistent = xml(d, VIR_DOMAIN_XML_INACTIVE);
    if (!persistent) return persistent.take_error();
    return parse_domain_xml(*live).boot_devs != parse_domain_xml(*persistent).boot_devs;
  }

  Status reset(const std::string& id, const std::string& t) {
    auto d = lookup(id);
    if (!d) return d.take_error();
    DomainRef ref{*d};
    const int active = virDomainIsActive(ref.d);
    if (active < 0) return Error(Code::kDriverError, last_error("query domain"));
    int rc = 0;
    const char* what = t.c_str();
    if (t == "On" || t == "ForceOn") {
      if (!active) rc = virDomainCreate(ref.d);
    } else if (t == "ForceOff") {
      if (active) rc = virDomainDestroy(ref.d);
    } else if (t == "GracefulShutdown") {
      if (active) rc = virDomainShutdown(ref.d);
    } else if (t == "ForceRestart" || t == "GracefulRestart") {
      // A real BMC's boot override takes effect at the next boot, but a running qemu
      // keeps the boot order it was started with across a reset. When the persistent
      // definition's order differs (set_boot ran since the start), restart the
      // process instead so the firmware sees the new order.
      auto changed = active ? boot_order_changed(ref.d) : Result<bool>(false);
      if (!changed) return changed.take_error();
      if (!active) rc = virDomainCreate(ref.d);
      else if (*changed) {
        rc = virDomainDestroy(ref.d);
        if (rc == 0) rc = virDomainCreate(ref.d);
      } else if (t == "ForceRestart") rc = virDomainReset(ref.d, 0);
      else rc = virDomainReboot(ref.d, 0);
    } else if (t == "PowerCycle") {
      if (active) rc = virDomainDestroy(ref.d);
      if (rc == 0) rc = virDomainCreate(ref.d);
    } else if (t == "Nmi") {
      if (active) rc = virDomainInjectNMI(ref.d, 0);
    } else if (t == "PushPowerButton") {
      rc = active ? virDomainShutdown(ref.d) : virDomainCreate(ref.d);
    } else {
      return Error(Code::kInvalidArgument, "unknown ResetType " + t);
    }
    if (rc < 0) return Error(Code::kDriverError, last_error(what));
    return ok_status();
  }

  Status set_boot(const std::string& id, const BootOverride& b) {
    auto d = lookup(id);
    if (!d) return d.take_error();
    DomainRef ref{*d};
    if (b.target != "None") {
      std::vector<std::string> devs;
      if (b.target == "Pxe" || b.target == "UefiHttp") devs = {"network", "hd"};
      else if (b.target == "Hdd") devs = {"hd", "network"};
      else if (b.target == "Cd") devs = {"cdrom", "hd"};
      else return Error(Code::kInvalidArgument, "this virtual BMC cannot boot from " + b.target);
      auto x = xml(ref.d, VIR_DOMAIN_XML_INACTIVE | VIR_DOMAIN_XML_SECURE);
      if (!x) return x.take_error();
      const std::string updated = set_boot_devs(*x, devs);
      virDomainPtr nd = virDomainDefineXML(conn, updated.c_str());
      if (!nd) return Error(Code::kDriverError, last_error("define domain"));
      virDomainFree(nd);
    }
    std::lock_guard<std::mutex> lock(mu);
    overrides[id] = b;
    return ok_status();
  }

  Result<MachineHardware> hardware(const std::string& id) {
    auto d = lookup(id);
    if (!d) return d.take_error();
    DomainRef ref{*d};
    auto x = xml(ref.d, 0);
    if (!x) return x.take_error();
    const DomainXmlInfo info = parse_domain_xml(*x);
    MachineHardware h;
    h.cpus = info.vcpus;
    h.memory_mib = info.memory_kib / 1024;
    h.disks = info.disks;
    h.macs = info.macs;
    for (auto& disk : h.disks) {
      virDomainBlockInfo bi;
      if (virDomainGetBlockInfo(ref.d, disk.name.c_str(), &bi, 0) == 0) {
        disk.size_bytes = static_cast<int64_t>(bi.capacity);
      }
    }
    return h;
  }
};

// libvirt prints errors to stderr by default; the backend reports them itself.
static void quiet_errors(void*, virErrorPtr) {}

Result<std::unique_ptr<LibvirtBackend>> LibvirtBackend::open(const std::string& uri) {
  virSetErrorFunc(nullptr, quiet_errors);
  auto impl = std::make_unique<Impl>();
  impl->conn = virConnectOpen(uri.c_str());
  if (!impl->conn) return Error(Code::kUnavailable, last_error(("open " + uri).c_str()));
  return std::unique_ptr<LibvirtBackend>(new LibvirtBackend(std::move(impl)));
}

LibvirtBackend::LibvirtBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

LibvirtBackend::~LibvirtBackend() {
  pool_.join();
  if (impl_->conn) virConnectClose(impl_->conn);
}

// Each call's closure is a named local: GCC 12 destroys a closure temporary
// with non-trivial captures twice when it sits inside a co_await expression.
asio::awaitable<Result<std::vector<std::string>>> LibvirtBackend::machines() {
  Impl* impl = impl_.get();
  std::function<Result<std::vector<std::string>>()> call = [impl] { return impl->list(); };
  co_return co_await offload(pool_, call);
}

asio::awaitable<Result<MachineState>> LibvirtBackend::state(std::string id) {
  Impl* impl = impl_.get();
  std::function<Result<MachineState>()> call = [impl, id] { return impl->state(id); };
  co_return co_await offload(pool_, call);
}

asio::awaitable<Status> LibvirtBackend::reset(std::string id, std::string reset_type) {
  Impl* impl = impl_.get();
  std::function<Status()> call = [impl, id, reset_type] { return impl->reset(id, reset_type); };
  co_return co_await offload(pool_, call);
}

asio::awaitable<Status> LibvirtBackend::set_boot(std::string id, BootOverride boot) {
  Impl* impl = impl_.get();
  std::function<Status()> call = [impl, id, boot] { return impl->set_boot(id, boot); };
  co_return co_await offload(pool_, call);
}

asio::awaitable<Result<MachineHardware>> LibvirtBackend::hardware(std::string id) {
  Impl* impl = impl_.get();
  std::function<Result<MachineHardware>()> call = [impl, id] { return impl->hardware(id); };
  co_return co_await offload(pool_, call);
}

}  // namespace kiln::vbmc
