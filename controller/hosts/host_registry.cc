#include "controller/hosts/host_registry.h"

#include <libvirt/libvirt.h>

#include <cstdlib>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "drivers/libvirt/host_facts.h"

namespace kiln {

Result<HostCapacity> discover_capacity(_virConnect* conn, Logger& log) {
  char* caps = virConnectGetCapabilities(conn);
  if (!caps) return Error(Code::kDriverError, libvirt::last_error("read capabilities"));
  std::string caps_xml(caps);
  std::free(caps);
  Result<HostCapacity> c = libvirt::parse_capabilities(caps_xml);
  if (!c) return c;
  // Hosts that report no NUMA topology still report totals.
  virNodeInfo info;
  if (virNodeGetInfo(conn, &info) == 0) {
    if (c->cpus == 0) c->cpus = static_cast<int>(info.cpus);
    if (c->memory_mib == 0) c->memory_mib = static_cast<int64_t>(info.memory / 1024);
    if (c->arch.empty()) c->arch = info.model;
  }
  if (c->cells.empty() && c->cpus > 0) {
    NumaCell cell;
    cell.memory_mib = c->memory_mib;
    for (int i = 0; i < c->cpus; ++i) cell.cpus.push_back(i);
    c->cells.push_back(cell);
  }
  virNodeDevicePtr* devs = nullptr;
  int n = virConnectListAllNodeDevices(conn, &devs, VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV);
  if (n < 0) n = virConnectListAllNodeDevices(conn, &devs, 0);  // drivers without the filter
  if (n < 0) {
    log.warn("cannot list node devices; no GPUs discovered", {{"error", libvirt::last_error("list node devices")}});
    return c;
  }
  for (int i = 0; i < n; ++i) {
    if (char* x = virNodeDeviceGetXMLDesc(devs[i], 0)) {
      if (std::optional<HostGpu> g = libvirt::parse_gpu_nodedev(x)) c->gpus.push_back(std::move(*g));
      std::free(x);
    }
    virNodeDeviceFree(devs[i]);
  }
  std::free(devs);
  return c;
}

HostRegistry::HostRegistry(asio::io_context& io, NodeStore& store, BlockingPool& virt, const SecretBox& secrets,
                           HostRegistryOptions options, Logger log)
    : io_(io), store_(store), virt_(virt), secrets_(secrets), opt_(options), log_(std::move(log)), timer_(io) {}

HostRegistry::~HostRegistry() { stop(); }

void HostRegistry::stop() {
  stopped_ = true;
  asio::post(io_, [this] { timer_.cancel(); });
}

std::shared_ptr<HostRegistry::Entry> HostRegistry::entry_for(const Host& h) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(h.id);
  if (it != entries_.end() && it->second->conn->uri() == h.uri) return it->second;
  std::string password;
  if (!h.password_sealed.empty()) {
    if (auto pw = secrets_.open(h.password_sealed)) password = *pw;
  }
  auto e = std::make_shared<Entry>();
  e->conn = std::make_shared<libvirt::HostConnection>(h.uri, h.username, password);
  e->backoff = opt_.initial_backoff;
  entries_[h.id] = e;
  return e;
}

Result<Host> HostRegistry::connect_blocking(const std::string& host_id, bool respect_backoff) {
  Result<Host> h = store_.get_host(host_id);
  if (!h) return h;
  std::shared_ptr<Entry> e = entry_for(*h);
  std::lock_guard<std::mutex> l(e->m);
  auto now = std::chrono::steady_clock::now();
  if (e->conn->is_alive()) {
    if (h->status != "ready") {
      Status s = store_.set_host_status(h->id, "ready", "", std::nullopt);
      (void)s;
    }
    e->was_ready = true;
    return store_.get_host(host_id);
  }
  if (e->was_ready) {
    // It was up and is not any more: say so at once, before any retry.
    std::string why = e->conn->down_reason();
    log_.warn("host connection lost", {{"host", h->name}, {"reason", why}});
    Status s = store_.set_host_status(h->id, "unreachable", why, std::nullopt);
    (void)s;
    e->was_ready = false;
    e->next_attempt = now;
  }
  if (respect_backoff && now < e->next_attempt) return store_.get_host(host_id);
  Status opened = e->conn->open();
  Result<HostCapacity> cap = Error(Code::kInternal, "not discovered");
  if (opened) {
    Result<libvirt::ConnPtr> c = e->conn->get();
    cap = c ? discover_capacity(c->get(), log_) : Result<HostCapacity>(c.take_error());
  }
  if (!opened || !cap) {
    std::string why = !opened ? opened.error().message : cap.error().message;
    if (opened) e->conn->close();
    e->next_attempt = now + e->backoff;
    e->backoff = std::min(e->backoff * 2, opt_.max_backoff);
    log_.warn("host unreachable", {{"host", h->name}, {"reason", why}});
    Status s = store_.set_host_status(h->id, "unreachable", why, std::nullopt);
    (void)s;
    return store_.get_host(host_id);
  }
  e->backoff = opt_.initial_backoff;
  e->was_ready = true;
  log_.info("host connected", {{"host", h->name},
                               {"cpus", std::to_string(cap->cpus)},
                               {"memory_mib", std::to_string(cap->memory_mib)},
                               {"gpus", std::to_string(cap->gpus.size())}});
  Status s = store_.set_host_status(h->id, "ready", "", *cap);
  if (!s) return s.take_error();
  return store_.get_host(host_id);
}

asio::awaitable<Result<Host>> HostRegistry::connect(std::string host_id) {
  auto call = [this, host_id] { return connect_blocking(host_id, false); };  // named (GCC 12)
  co_return co_await virt_.run(call);
}

void HostRegistry::forget(const std::string& host_id) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(host_id);
    if (it == entries_.end()) return;
    e = it->second;
    entries_.erase(it);
  }
  e->conn->close();
}

void HostRegistry::drop_for_test(const std::string& host_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(host_id);
  if (it != entries_.end()) it->second->conn->close();
}

Result<libvirt::ConnPtr> HostRegistry::connection(const std::string& host_id) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(host_id);
    if (it != entries_.end()) e = it->second;
  }
  if (!e) {
    Result<Host> h = store_.get_host(host_id);
    if (!h) return h.take_error();
    return Error(Code::kUnavailable, "host " + h->name + " is not connected");
  }
  return e->conn->get();
}

asio::awaitable<void> HostRegistry::check_all() {
  auto list = [this] { return store_.list_hosts(); };
  Result<std::vector<Host>> hosts = co_await virt_.run(list);
  if (!hosts) {
    log_.warn("host check: cannot list hosts", {{"error", hosts.error().message}});
    co_return;
  }
  for (const Host& h : *hosts) {
    if (stopped_) co_return;
    std::string id = h.id;
    auto call = [this, id] { return connect_blocking(id, true); };
    Result<Host> r = co_await virt_.run(call);
    (void)r;
  }
}

asio::awaitable<void> HostRegistry::start() {
  co_await check_all();
  asio::co_spawn(io_, [this]() { return loop(); }, asio::detached);
}

asio::awaitable<void> HostRegistry::loop() {
  while (!stopped_) {
    timer_.expires_after(opt_.check_interval);
    boost::system::error_code ec;
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopped_) break;
    try {
      co_await check_all();
    } catch (const std::exception& e) {
      log_.error("host check crashed", {{"error", e.what()}});
    }
  }
}

Result<std::optional<libvirt::DomainLocation>> HostRegistry::locate(const std::string& node_id) {
  Result<VirtualMachine> vm = store_.get_virtual_machine(node_id);
  if (!vm) {
    if (vm.error().code == Code::kNotFound) return std::optional<libvirt::DomainLocation>();
    return vm.take_error();
  }
  if (vm->state == "placed") return std::optional<libvirt::DomainLocation>();  // not defined yet
  Result<Host> h = store_.get_host(vm->host_id);
  if (!h) return h.take_error();
  Result<libvirt::ConnPtr> c = connection(vm->host_id);
  if (!c) return Error(Code::kUnavailable, "host " + h->name + " is unreachable: " + c.error().message);
  libvirt::DomainLocation loc;
  loc.host_name = h->name;
  loc.domain = vm->domain;
  loc.conn = *c;
  return std::optional<libvirt::DomainLocation>(loc);
}

}  // namespace kiln
