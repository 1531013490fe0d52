#include "controller/hosts/host_registry.h"

#include <libvirt/libvirt.h>

#include <cstdlib>
#include <system_error>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
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

namespace {

// What a connect thread found. Written by the thread, read by the waiting
// coroutine once `done`; shared so either may go first.
struct ConnectOutcome {
  std::mutex m;
  bool done = false;                 // guarded by m
  Result<HostCapacity> capacity;     // guarded by m; the error when open or discovery failed
};

std::string seconds_text(std::chrono::milliseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + "s";
}

}  // namespace

HostRegistry::HostRegistry(asio::io_context& io, HostStore& store, BlockingPool& virt, const SecretBox& secrets,
                           HostRegistryOptions options, Logger log)
    : io_(io), store_(store), virt_(virt), secrets_(secrets), opt_(options), log_(std::move(log)),
      strand_(asio::make_strand(io)), timer_(strand_) {
  drop_wake_->wake = [this] { wake(true); };
}

HostRegistry::~HostRegistry() {
  stop();
  // A connection dropping from now on (libvirt's thread) no longer reaches us.
  std::lock_guard<std::mutex> l(drop_wake_->m);
  drop_wake_->wake = nullptr;
}

void HostRegistry::stop() {
  stopped_ = true;
  asio::post(strand_, [this] { timer_.cancel(); });
}

void HostRegistry::wake(bool check) {
  if (check) check_now_ = true;
  asio::post(strand_, [this] { timer_.cancel(); });
}

std::shared_ptr<HostRegistry::Entry> HostRegistry::entry_for(const Host& h) {
  std::lock_guard<std::mutex> l(mu_);
  if (forgotten_.contains(h.id)) return nullptr;
  auto it = entries_.find(h.id);
  if (it != entries_.end()) return it->second;  // a host's URI never changes
  std::string password;
  if (!h.password_sealed.empty()) {
    if (auto pw = secrets_.open(h.password_sealed)) password = *pw;
  }
  auto e = std::make_shared<Entry>();
  e->id = h.id;
  // A drop libvirt reports wakes the check loop at once.
  auto on_drop = [w = drop_wake_] {
    std::lock_guard<std::mutex> l(w->m);
    if (w->wake) w->wake();
  };
  e->conn = std::make_shared<libvirt::HostConnection>(h.uri, h.username, password, on_drop);
  e->backoff = opt_.initial_backoff;
  const bool first = entries_.empty();
  entries_[h.id] = e;
  // The first host known: the loop, which slept with nothing to check,
  // plans its checks from now on.
  if (first) wake(false);
  return e;
}

bool HostRegistry::begin_connect(const std::shared_ptr<Entry>& e, const Host& h) {
  {
    std::lock_guard<std::mutex> l(e->m);
    if (e->connecting || e->gone || stopped_) return false;
    e->connecting = true;
  }
  std::string name = h.name;
  asio::co_spawn(io_, attempt(e, name), asio::detached);
  return true;
}

// What record() writes; built in named locals (no temporaries inside a
// co_await expression: docs/coroutines.md).
struct HostRegistry::StatusUpdate {
  std::string host_id;
  std::string status;
  std::string reason;
  std::optional<HostCapacity> capacity;
};

namespace {
HostRegistry::StatusUpdate unreachable(const std::string& host_id, const std::string& why) {
  return {host_id, "unreachable", why, std::nullopt};
}
HostRegistry::StatusUpdate ready(const std::string& host_id, std::optional<HostCapacity> capacity) {
  return {host_id, "ready", "", std::move(capacity)};
}
}  // namespace

asio::awaitable<void> HostRegistry::pause(std::chrono::milliseconds d) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer t(ex);
  t.expires_after(d);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<void> HostRegistry::record(StatusUpdate u) {
  auto call = [this, &u] { return store_.set_host_status(u.host_id, u.status, u.reason, u.capacity); };
  Status s = co_await virt_.run(call);
  (void)s;  // kNotFound: deleted meanwhile, nothing to record
}

asio::awaitable<void> HostRegistry::attempt(std::shared_ptr<Entry> e, std::string host_name) {
  const auto started = std::chrono::steady_clock::now();
  const auto deadline = started + opt_.connect_timeout;
  // Poll interval for the waits below: short, so a test's loopback connect
  // is seen at once; the waits hold no thread.
  const std::chrono::milliseconds poll(20);
  bool timed_out = false;

  // A slot: at most max_connects connect threads exist at any time.
  for (;;) {
    int used = slots_->in_use.load();
    if (used < opt_.max_connects && slots_->in_use.compare_exchange_weak(used, used + 1)) break;
    if (stopped_ || e->gone) co_return;
    if (!timed_out && std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      std::string why = "connect not started within " + seconds_text(opt_.connect_timeout) + ": all " +
                        std::to_string(opt_.max_connects) + " connect slots are held by hosts that do not answer";
      log_.warn("host unreachable", {{"host", host_name}, {"reason", why}});
      StatusUpdate u = unreachable(e->id, why);
      co_await record(u);
    }
    co_await pause(poll);
  }

  ++connects_started_;
  auto outcome = std::make_shared<ConnectOutcome>();
  {
    std::shared_ptr<Slots> slots = slots_;
    std::shared_ptr<libvirt::HostConnection> conn = e->conn;
    std::shared_ptr<Entry> entry = e;
    Logger log = log_;
    auto body = [slots, conn, entry, outcome, log]() mutable {
      Result<HostCapacity> cap = Error(Code::kInternal, "not discovered");
      Status opened = conn->open();
      if (!opened) {
        cap = opened.take_error();
      } else if (entry->gone) {
        cap = Error(Code::kNotFound, "host deleted");
      } else {
        Result<libvirt::ConnPtr> c = conn->get();
        if (c) cap = discover_capacity(c->get(), log);
        else cap = c.take_error();
        if (!cap) conn->close();
      }
      // forget() may have run while libvirt held us: what we opened is not wanted.
      if (entry->gone) conn->close();
      {
        std::lock_guard<std::mutex> l(outcome->m);
        outcome->capacity = std::move(cap);
        outcome->done = true;
      }
      slots->in_use.fetch_sub(1);
    };
    bool spawned = true;
    try {
      std::thread(std::move(body)).detach();
    } catch (const std::system_error&) {
      spawned = false;
    }
    if (!spawned) {
      slots_->in_use.fetch_sub(1);
      std::lock_guard<std::mutex> l(outcome->m);
      outcome->capacity = Error(Code::kUnavailable, "cannot start a connect thread");
      outcome->done = true;
    }
  }

  for (;;) {
    bool done = false;
    {
      std::lock_guard<std::mutex> l(outcome->m);
      done = outcome->done;
    }
    if (done) break;
    if (stopped_ || e->gone) co_return;  // the thread finishes (and closes) on its own
    if (!timed_out && std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      std::string why = "connect timed out after " + seconds_text(opt_.connect_timeout) +
                        ": the hypervisor did not answer (still trying in the background)";
      log_.warn("host unreachable", {{"host", host_name}, {"reason", why}});
      StatusUpdate u = unreachable(e->id, why);
      co_await record(u);
    }
    co_await pause(poll);
  }
  if (stopped_ || e->gone) co_return;

  Result<HostCapacity> cap;
  {
    std::lock_guard<std::mutex> l(outcome->m);
    cap = std::move(outcome->capacity);
  }
  if (!cap) {
    std::string why = cap.error().message;
    {
      std::lock_guard<std::mutex> l(e->m);
      e->next_attempt = std::chrono::steady_clock::now() + e->backoff;
      e->backoff = std::min(e->backoff * 2, opt_.max_backoff);
      e->was_ready = false;
    }
    log_.warn("host unreachable", {{"host", host_name}, {"reason", why}});
    StatusUpdate u = unreachable(e->id, why);
    co_await record(u);
    // The retry is due when the backoff ends: the loop plans for it.
    wake(false);
  } else {
    {
      std::lock_guard<std::mutex> l(e->m);
      e->backoff = opt_.initial_backoff;
      e->was_ready = true;
    }
    log_.info("host connected", {{"host", host_name},
                                 {"cpus", std::to_string(cap->cpus)},
                                 {"memory_mib", std::to_string(cap->memory_mib)},
                                 {"gpus", std::to_string(cap->gpus.size())}});
    StatusUpdate u = ready(e->id, *cap);
    co_await record(u);
  }
  std::lock_guard<std::mutex> l(e->m);
  e->connecting = false;
}

asio::awaitable<void> HostRegistry::connect_later(std::string host_id) {
  auto get = [this, &host_id] { return store_.get_host(host_id); };
  Result<Host> h = co_await virt_.run(get);
  if (!h) co_return;
  std::shared_ptr<Entry> e = entry_for(*h);
  if (!e) co_return;
  bool started = begin_connect(e, *h);
  (void)started;
}

void HostRegistry::connect_in_background(const std::string& host_id) {
  if (stopped_) return;
  asio::co_spawn(io_, connect_later(host_id), asio::detached);
}

asio::awaitable<Result<Host>> HostRegistry::connect(std::string host_id) {
  auto get = [this, &host_id] { return store_.get_host(host_id); };
  Result<Host> h = co_await virt_.run(get);
  if (!h) co_return h;
  std::shared_ptr<Entry> e = entry_for(*h);
  if (!e) co_return Error(Code::kNotFound, "host " + h->name + " was deleted");
  bool started = begin_connect(e, *h);
  (void)started;  // one in flight already: wait for that one
  const auto deadline = std::chrono::steady_clock::now() + opt_.connect_timeout;
  const std::chrono::milliseconds poll(10);
  for (;;) {
    bool connecting = false;
    {
      std::lock_guard<std::mutex> l(e->m);
      connecting = e->connecting;
    }
    if (!connecting || stopped_ || std::chrono::steady_clock::now() >= deadline) break;
    co_await pause(poll);
  }
  Result<Host> after = co_await virt_.run(get);
  co_return after;
}

void HostRegistry::forget(const std::string& host_id) {
  std::shared_ptr<Entry> e;
  {
    std::lock_guard<std::mutex> l(mu_);
    forgotten_.insert(host_id);
    auto it = entries_.find(host_id);
    if (it == entries_.end()) return;
    e = it->second;
    entries_.erase(it);
  }
  // Before close(): a connect thread that opens after this sees `gone` and
  // closes what it opened itself.
  e->gone = true;
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
    // Registered through another kilnd (or never checked here yet): connect
    // it now rather than at the next check.
    connect_in_background(h->id);
    return Error(Code::kUnavailable, "host " + h->name + " is not connected");
  }
  return e->conn->get();
}

asio::awaitable<void> HostRegistry::check_all() {
  ++checks_;
  last_check_ns_ = std::chrono::steady_clock::now().time_since_epoch().count();
  auto list = [this] { return store_.list_hosts(); };
  Result<std::vector<Host>> hosts = co_await virt_.run(list);
  if (!hosts) {
    log_.warn("host check: cannot list hosts", {{"error", hosts.error().message}});
    co_return;
  }
  for (const Host& h : *hosts) {
    if (stopped_) co_return;
    std::shared_ptr<Entry> e = entry_for(h);
    if (!e) continue;  // deleted while we listed
    auto now = std::chrono::steady_clock::now();
    std::string lost;     // why it dropped, when it just did
    bool mark_ready = false, due = false;
    {
      std::lock_guard<std::mutex> l(e->m);
      if (e->connecting) continue;
      if (e->conn->is_alive()) {
        mark_ready = h.status != "ready";
        e->was_ready = true;
      } else {
        if (e->was_ready) {
          // It was up and is not any more: say so at once, before any retry.
          lost = e->conn->down_reason();
          e->was_ready = false;
          e->next_attempt = now;
        }
        due = now >= e->next_attempt;
      }
    }
    if (mark_ready) {
      StatusUpdate u = ready(h.id, std::nullopt);
      co_await record(u);
    }
    if (!lost.empty()) {
      log_.warn("host connection lost", {{"host", h.name}, {"reason", lost}});
      StatusUpdate u = unreachable(h.id, lost);
      co_await record(u);
    }
    if (due) {
      bool started = begin_connect(e, h);
      (void)started;
    }
  }
}

asio::awaitable<void> HostRegistry::start() {
  co_await check_all();
  asio::co_spawn(strand_, [this]() { return loop(); }, asio::detached);
}

std::optional<std::chrono::steady_clock::time_point> HostRegistry::next_check() const {
  using steady = std::chrono::steady_clock;
  std::optional<steady::time_point> due;
  auto sooner = [&due](steady::time_point t) {
    if (!due || t < *due) due = t;
  };
  bool any = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [id, e] : entries_) {
      any = true;
      std::lock_guard<std::mutex> le(e->m);
      // Down and not connecting: its retry is due when its backoff ends.
      if (!e->connecting && !e->was_ready) sooner(e->next_attempt);
    }
  }
  if (any || !opt_.sole)
    sooner(steady::time_point(steady::duration(last_check_ns_.load())) + opt_.check_interval);
  return due;
}

asio::awaitable<void> HostRegistry::loop() {
  using steady = std::chrono::steady_clock;
  // The longest sleep with nothing due (the loop then plans again).
  constexpr std::chrono::hours kLongestSleep{24};
  while (!stopped_) {
    // On the strand from the look at check_now_ to the start of the wait: a
    // wake-up's cancel runs either before the look or after the wait began.
    if (!check_now_.exchange(false)) {
      std::optional<steady::time_point> due = next_check();
      if (!due || *due > steady::now()) {
        timer_.expires_at(due ? *due : steady::now() + kLongestSleep);
        boost::system::error_code ec;
        co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        if (stopped_) break;
        // Woken to plan again, or early: nothing to check yet.
        if (!check_now_.exchange(false) && (!(due = next_check()) || *due > steady::now())) continue;
      }
    }
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
