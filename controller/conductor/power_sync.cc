#include "controller/conductor/power_sync.h"

#include "controller/conductor/driver_target.h"
#include "controller/conductor/membership.h"

#include "common/wait_group.h"
#include "controller/model/event_types.h"

#include <atomic>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kiln {

namespace {
constexpr const char* kFault = "power_failure";
constexpr const char* kReasonPrefix = "power sync: ";

bool auto_maintenance(const Node& n) {
  return n.maintenance && n.maintenance_reason.rfind(kReasonPrefix, 0) == 0;
}

NodeCondition unchanged_and_free(int64_t version) {
  NodeCondition c;
  c.version = version;
  c.reservation = std::string();
  return c;
}

EventDraft power_event(const PowerSyncNode& n, const std::string& type, const std::string& from, const std::string& to,
                       nlohmann::json detail) {
  EventDraft e;
  e.type = type;
  e.node_id = n.id;
  e.from_state = from;
  e.to_state = to;
  e.detail = std::move(detail);
  return e;
}
}  // namespace

struct PowerSync::Impl : std::enable_shared_from_this<PowerSync::Impl> {
  Impl(asio::io_context& io_, NodeRepo& store_, BlockingPool& db_, const DriverRegistry& drivers_,
       const SecretBox& secrets_, PowerSyncOptions opt_, Logger log_)
      : io(io_), store(store_), db(db_), drivers(drivers_), secrets(secrets_), opt(opt_), log(std::move(log_)),
        timer(io_) {}

  asio::io_context& io;
  NodeRepo& store;
  BlockingPool& db;
  const DriverRegistry& drivers;
  const SecretBox& secrets;
  PowerSyncOptions opt;
  Logger log;
  asio::steady_timer timer;
  std::atomic<bool> stopped{false};
  std::mutex failures_mu;
  std::map<std::string, int> failures;  // consecutive failed sweeps per node
  mutable std::mutex stats_mu;
  SweepStats last;
  uint64_t sweeps = 0;
  std::atomic<bool> sweeping{false};

  // One sweep's shared state. Workers run on any I/O thread: the index is
  // an atomic, the stats are guarded by `mu`; `helpers` counts the spawned
  // workers still running (each holds a ticket until its frame is gone).
  struct Sweep {
    std::vector<PowerSyncNode> nodes;
    std::atomic<std::size_t> next{0};
    WaitGroup helpers;
    std::mutex mu;
    SweepStats stats;
  };

  // Every node this instance syncs, as power_sync_nodes reads them.
  asio::awaitable<Result<std::vector<PowerSyncNode>>> load_nodes() {
    constexpr int kPage = 1000;
    std::vector<PowerSyncNode> all;
    const std::vector<RingRange> ranges = opt.ranges ? opt.ranges() : std::vector<RingRange>{kWholeRing};
    RingCursor after;
    for (;;) {
      Result<std::vector<PowerSyncNode>> page =
          co_await db.run([&] { return store.power_sync_nodes(ranges, after, kPage); });
      if (!page) co_return page.take_error();
      const std::size_t n = page->size();
      if (n > 0) after = RingCursor::after(page->back());
      all.reserve(all.size() + n);
      for (PowerSyncNode& node : *page)
        if (!opt.owns || opt.owns(ownership_key(node.id, node.allocation)))
          all.push_back(std::move(node));  // another's: its owner syncs it
      if (n < static_cast<std::size_t>(kPage)) break;
    }
    co_return all;
  }

  asio::awaitable<void> write(const PowerSyncNode& n, std::function<Status(Node&)> mutate,
                              std::vector<EventDraft> events) {
    NodeCondition cond = unchanged_and_free(n.version);
    Result<Node> w = co_await db.run([&] { return store.update_node_if(n.id, cond, mutate, events); });
    // A node changed since the sweep read it (an operation, a PATCH) is left for the next sweep.
    if (!w && w.error().code != Code::kPreconditionFailed && w.error().code != Code::kConflict)
      log.warn("power sync write failed", {{"node", n.id}, {"error", w.error().message}});
  }

  int bump_failures(const std::string& id) {
    std::lock_guard<std::mutex> l(failures_mu);
    return ++failures[id];
  }
  void clear_failures(const std::string& id) {
    std::lock_guard<std::mutex> l(failures_mu);
    failures.erase(id);
  }

  // Syncs one node; counts go to `stats` (owned by the calling worker).
  asio::awaitable<void> sync_one(const PowerSyncNode& n, SweepStats& stats) {
    Driver* d = drivers.find(n.bmc.driver);
    if (!power_sync_asks(n.provision_state, n.reservation) || d == nullptr || !d->power) {
      ++stats.skipped;
      co_return;
    }
    ++stats.nodes;
    Result<DriverTarget> t = driver_target(n, secrets);
    if (!t) {
      // Asking the BMC with no password would only fail later, and for the
      // wrong reason: this node cannot be synced until its password is set
      // again, so it is faulted now with the real one.
      ++stats.failed;
      if (n.fault == kFault) co_return;
      std::string reason = std::string(kReasonPrefix) + t.error().message;  // named: GCC 12 rule 2
      co_await fault(n, reason, stats);
      co_return;
    }
    Result<PowerState> r = co_await d->power->get_power_state(*t);
    if (r) {
      ++stats.ok;
      clear_failures(n.id);
      PowerState observed = *r;
      bool drift = observed != n.power_state;
      bool recover = n.fault == kFault;
      if (!drift && !recover) co_return;
      std::vector<EventDraft> events;
      if (drift) {
        ++stats.drifted;
        events.push_back(power_event(n, event_type::kPowerDrift, std::string(to_string(n.power_state)),
                                     std::string(to_string(observed)), nlohmann::json{{"source", "power_sync"}}));
      }
      if (recover) {
        ++stats.recovered;
        events.push_back(power_event(n, event_type::kNodeFaultCleared, kFault, "", nlohmann::json{{"source", "power_sync"}}));
      }
      std::function<Status(Node&)> mutate = [observed, recover](Node& m) {
            m.power_state = observed;
            if (recover) {
              m.fault.clear();
              if (auto_maintenance(m)) {
                m.maintenance = false;
                m.maintenance_reason.clear();
              }
            }
            return ok_status();
      };
      co_await write(n, mutate, std::move(events));
      co_return;
    }
    ++stats.failed;
    int count = bump_failures(n.id);
    if (count < opt.max_failures || n.fault == kFault) co_return;
    std::string reason = std::string(kReasonPrefix) + r.error().message + " (" + std::to_string(count) +
                         " sweeps in a row)";
    co_await fault(n, reason, stats);
  }

  // Faults `n` with `reason` (and automatic maintenance unless an operator's
  // is on), with a node.fault event.
  asio::awaitable<void> fault(const PowerSyncNode& n, std::string reason, SweepStats& stats) {
    ++stats.faulted;
    log.warn("BMC failed power sync; node faulted", {{"node", n.id}, {"reason", reason}});
    std::vector<EventDraft> events = {
        power_event(n, event_type::kNodeFault, "", kFault, nlohmann::json{{"reason", reason}, {"source", "power_sync"}})};
    std::function<Status(Node&)> mutate = [reason](Node& m) {
          m.fault = kFault;
          m.last_error = reason;
          if (!m.maintenance) {
            m.maintenance = true;
            m.maintenance_reason = reason;
          }
          return ok_status();
    };
    co_await write(n, mutate, std::move(events));
  }

  asio::awaitable<void> worker(std::shared_ptr<Sweep> s) {
    SweepStats mine;
    for (std::size_t i = s->next++; i < s->nodes.size(); i = s->next++) {
      try {
        co_await sync_one(s->nodes[i], mine);
      } catch (const std::exception& e) {
        ++mine.failed;
        log.error("power sync crashed on a node", {{"node", s->nodes[i].id}, {"error", e.what()}});
      }
    }
    {
      std::lock_guard<std::mutex> l(s->mu);
      SweepStats& t = s->stats;
      t.nodes += mine.nodes;
      t.ok += mine.ok;
      t.failed += mine.failed;
      t.drifted += mine.drifted;
      t.faulted += mine.faulted;
      t.recovered += mine.recovered;
      t.skipped += mine.skipped;
    }
  }

  asio::awaitable<SweepStats> sweep() {
    auto start = std::chrono::steady_clock::now();
    auto s = std::make_shared<Sweep>();
    Result<std::vector<PowerSyncNode>> nodes = co_await load_nodes();
    if (!nodes) {
      log.warn("power sync could not list nodes", {{"error", nodes.error().message}});
      co_return s->stats;
    }
    s->nodes = std::move(*nodes);
    std::size_t workers = std::min(opt.concurrency == 0 ? std::size_t{1} : opt.concurrency, s->nodes.size());
    auto self = shared_from_this();
    // workers-1 helpers; this coroutine is the last worker, then waits for
    // the others: the last helper to finish wakes it (no polling).
    for (std::size_t i = 1; i < workers; ++i)
      asio::co_spawn(io, [self, s, ticket = s->helpers.add()]() { return self->worker(s); }, asio::detached);
    if (workers > 0) co_await worker(s);
    co_await s->helpers.wait();
    SweepStats out;
    {
      std::lock_guard<std::mutex> l(s->mu);
      out = s->stats;
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    {
      std::lock_guard<std::mutex> l(stats_mu);
      last = out;
      ++sweeps;
    }
    log.info("power sync sweep", {{"nodes", std::to_string(out.nodes)},
                                  {"failed", std::to_string(out.failed)},
                                  {"drifted", std::to_string(out.drifted)},
                                  {"faulted", std::to_string(out.faulted)},
                                  {"seconds", std::to_string(out.seconds)}});
    co_return out;
  }

  asio::awaitable<void> loop() {
    while (!stopped) {
      timer.expires_after(opt.interval);
      boost::system::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopped) break;
      SweepStats st = co_await sweep();
      (void)st;
    }
  }
};

PowerSync::PowerSync(asio::io_context& io, NodeRepo& store, BlockingPool& db, const DriverRegistry& drivers,
                     const SecretBox& secrets, PowerSyncOptions options, Logger log)
    : impl_(std::make_shared<Impl>(io, store, db, drivers, secrets, options, std::move(log))) {}

PowerSync::~PowerSync() { stop(); }

void PowerSync::start() {
  if (impl_->opt.interval.count() <= 0) return;
  auto self = impl_;
  asio::co_spawn(impl_->io, [self]() { return self->loop(); }, asio::detached);
}

void PowerSync::stop() {
  impl_->stopped = true;
  asio::post(impl_->io, [self = impl_] { self->timer.cancel(); });
}

asio::awaitable<SweepStats> PowerSync::sweep_once() {
  auto self = impl_;
  SweepStats st = co_await self->sweep();
  co_return st;
}

SweepStats PowerSync::last_sweep() const {
  std::lock_guard<std::mutex> l(impl_->stats_mu);
  return impl_->last;
}

uint64_t PowerSync::sweeps_done() const {
  std::lock_guard<std::mutex> l(impl_->stats_mu);
  return impl_->sweeps;
}

}  // namespace kiln
