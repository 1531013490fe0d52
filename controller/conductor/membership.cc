#include "controller/conductor/membership.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <mutex>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/ids.h"
#include "controller/conductor/membership_stats.h"

namespace kiln {

namespace {
std::atomic<uint64_t> g_ring_builds{0};
}  // namespace

uint64_t membership_ring_builds() { return g_ring_builds.load(std::memory_order_relaxed); }

bool RingView::acting() const {
  if (self_beat_at_ <= 0) return false;
  // Alone, no one takes this conductor's nodes when its heartbeat is late:
  // the process answering acts.
  if (sole_) return true;
  return clock_ != nullptr && clock_->now_ms() - self_beat_at_ <= timeout_ms_;
}

bool RingView::is_mine(std::string_view node_id) const {
  if (!acting()) return false;
  std::optional<std::string> o = ring_.owner(node_id);
  return o && *o == self_;
}

bool RingView::is_alive(std::string_view id) const {
  for (const ConductorState& c : conductors_)
    if (c.record.id == id) return c.alive;
  return false;
}

const ConductorRecord* RingView::find(std::string_view id) const {
  for (const ConductorState& c : conductors_)
    if (c.record.id == id) return &c.record;
  return nullptr;
}

std::string runner_of(std::string_view reservation) {
  const std::size_t slash = reservation.find('/');
  if (slash == std::string_view::npos || slash == 0) return "";
  return std::string(reservation.substr(0, slash));
}

struct Membership::Impl : std::enable_shared_from_this<Membership::Impl> {
  Impl(asio::io_context& io_, ConductorStore& store_, BlockingPool& db_, const Clock& clock_, MembershipOptions opt_,
       Logger log_)
      : io(io_), store(store_), db(db_), clock(clock_), opt(std::move(opt_)), log(std::move(log_)), timer(io_),
        strand(asio::make_strand(io_)), id(new_uuid()) {
    current = std::make_shared<RingView>(id, std::vector<ConductorState>{}, HashRing({}, opt.virtual_points), 0,
                                         opt.timeout, opt.sole, &clock);
  }

  asio::io_context& io;
  ConductorStore& store;
  BlockingPool& db;
  const Clock& clock;
  MembershipOptions opt;
  Logger log;
  asio::steady_timer timer;
  // Refreshes take turns here (in_turn()): they must not overlap, since
  // self_beat_at, lost and announcing are theirs and a view read later must
  // not be replaced by one read earlier.
  asio::strand<asio::io_context::executor_type> strand;
  const std::string id;
  std::atomic<bool> stopped{false};
  // The turn, on `strand` only: whether a refresh runs, and the refreshes
  // waiting for it to end, first come first served. A waiter parks on a
  // timer that never expires and is woken by its cancel; the queue shares
  // the timer, so a waiter's frame destroyed at shutdown leaves nothing
  // dangling here.
  bool turn_taken = false;
  std::deque<std::shared_ptr<asio::steady_timer>> turn_waiters;
  // This process's clock when its own heartbeat last went through; read and
  // written only by refreshes, which take turns.
  int64_t self_beat_at = 0;
  bool lost = false;  // our row was stopped by someone else: never act again
  // Whether a published view is announced to the on_change listeners: not
  // the first. Touched only by refresh_view(), which runs in turn.
  bool announcing = false;

  mutable std::mutex view_mu;
  std::shared_ptr<const RingView> current;  // guarded by view_mu
  std::vector<std::function<void()>> listeners;  // guarded by view_mu

  // Publishes `v`; `announce`: tell the listeners when it changed what
  // ownership depends on (Membership::on_change).
  void publish(std::shared_ptr<const RingView> v, bool announce) {
    std::vector<std::function<void()>> to_call;
    {
      std::lock_guard<std::mutex> l(view_mu);
      if (announce && changed(*current, *v)) to_call = listeners;
      current = std::move(v);
    }
    for (const std::function<void()>& f : to_call) f();
  }

  // Whether `next` differs from `prev` in a registration, a liveness, or in
  // acting where `prev` no longer does (judged now, as `next` is published).
  static bool changed(const RingView& prev, const RingView& next) {
    auto states = [](const RingView& v) {
      std::vector<std::pair<std::string, bool>> out;
      for (const ConductorState& c : v.conductors()) out.emplace_back(c.record.id, c.alive);
      std::sort(out.begin(), out.end());
      return out;
    };
    return states(prev) != states(next) || (!prev.acting() && next.acting());
  }

  ConductorRecord me() const { return ConductorRecord{id, opt.host, opt.api_url, 0, 0, 0}; }

  // Builds the view from the rows read, judged at `now`. The ring is built
  // again only when the live conductors differ from the current view's: a
  // heartbeat every 2 s that sees the same members (nearly every one) copies
  // the ring it has instead of hashing members x virtual_points strings and
  // sorting them (an idle kilnd does no work it already did).
  // Alone, this conductor is alive whatever its heartbeat's age (the process
  // building the view is running); only a stopped row ends it.
  std::shared_ptr<const RingView> build(const std::vector<ConductorRecord>& rows, int64_t now) const {
    std::vector<ConductorState> states;
    std::vector<std::string> live;
    for (const ConductorRecord& r : rows) {
      const bool answering = opt.sole && r.id == id && !lost;
      const bool alive = r.stopped_at == 0 && (answering || now - r.last_heartbeat_at <= opt.timeout.count());
      states.push_back({r, alive});
      if (alive) live.push_back(r.id);
    }
    // HashRing::members() is sorted with duplicates removed: compare alike.
    std::sort(live.begin(), live.end());
    live.erase(std::unique(live.begin(), live.end()), live.end());
    std::shared_ptr<const RingView> prev = view();
    HashRing ring = prev->ring().members() == live ? prev->ring() : new_ring(std::move(live));
    return std::make_shared<RingView>(id, std::move(states), std::move(ring), lost ? 0 : self_beat_at, opt.timeout,
                                      opt.sole, &clock);
  }

  HashRing new_ring(std::vector<std::string> live) const {
    g_ring_builds.fetch_add(1, std::memory_order_relaxed);
    return HashRing(std::move(live), opt.virtual_points);
  }

  std::shared_ptr<const RingView> view() const {
    std::lock_guard<std::mutex> l(view_mu);
    return current;
  }

  asio::awaitable<Status> start() {
    const int64_t before = clock.now_ms();
    Result<ConductorRecord> reg = co_await db.run([&] { return store.register_conductor(me()); });
    if (!reg) co_return reg.take_error();
    self_beat_at = before;
    if (opt.sole) {
      Result<std::vector<ConductorRecord>> rows = co_await db.run([&] { return store.list_conductors(); });
      if (!rows) co_return rows.take_error();
      for (const ConductorRecord& r : *rows) {
        if (r.id == id || r.stopped_at != 0) continue;
        Status s = co_await db.run([&] { return store.stop_conductor(r.id); });
        if (!s) co_return s;
        log.info("previous conductor marked stopped", {{"conductor", r.id}, {"host", r.host}});
      }
    }
    log.info("conductor registered", {{"conductor", id}, {"host", opt.host}, {"api_url", opt.api_url}});
    auto self = shared_from_this();
    co_await asio::co_spawn(strand, [self]() { return self->in_turn(false); }, asio::use_awaitable);
    asio::co_spawn(io, [self]() { return self->loop(); }, asio::detached);
    co_return ok_status();
  }

  // Heartbeats (re-registering when our row was forgotten), then re-reads,
  // after the refresh running (if any) has ended: the view published when
  // this returns was read after it was called.
  asio::awaitable<void> refresh() {
    auto self = shared_from_this();
    co_await asio::co_spawn(strand, [self]() { return self->in_turn(true); }, asio::use_awaitable);
  }

  // On `strand`: waits for the turn, then heartbeats and re-reads
  // (`heartbeat`) or only re-reads (start(), which has just registered).
  asio::awaitable<void> in_turn(bool heartbeat) {
    co_await take_turn();
    try {
      if (heartbeat) {
        co_await refresh_once();
      } else {
        co_await refresh_view();
      }
    } catch (...) {
      end_turn();
      throw;
    }
    end_turn();
  }

  // On `strand`: resumes once this refresh holds the turn.
  asio::awaitable<void> take_turn() {
    if (!turn_taken) {
      turn_taken = true;
      co_return;
    }
    auto wake = std::make_shared<asio::steady_timer>(strand, asio::steady_timer::time_point::max());
    turn_waiters.push_back(wake);
    boost::system::error_code ec;
    co_await wake->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }

  // On `strand`: hands the turn to the first waiter (it stays taken), or
  // frees it.
  void end_turn() {
    if (turn_waiters.empty()) {
      turn_taken = false;
      return;
    }
    std::shared_ptr<asio::steady_timer> next = std::move(turn_waiters.front());
    turn_waiters.pop_front();
    next->cancel();
  }

  asio::awaitable<void> refresh_once() {
    if (lost) co_return;
    const int64_t before = clock.now_ms();
    Result<ConductorRecord> beat = co_await db.run([&] { return store.heartbeat_conductor(id); });
    if (beat) {
      self_beat_at = before;
    } else if (beat.error().code == Code::kNotFound) {
      co_await row_missing(before);
    } else {
      log.warn("conductor heartbeat failed", {{"conductor", id}, {"error", beat.error().message}});
    }
    co_await refresh_view();
  }

  // Our heartbeat found no running row: forgotten (silent for an hour, e.g.
  // the store was away that long) means register again; stopped means
  // another process took our place or shut us down: stop acting for good.
  asio::awaitable<void> row_missing(int64_t before) {
    Result<std::vector<ConductorRecord>> rows = co_await db.run([&] { return store.list_conductors(); });
    if (!rows) co_return;
    bool present = false;
    for (const ConductorRecord& r : *rows) present |= r.id == id;
    if (present) {
      lost = true;
      log.error("this conductor's registration was marked stopped (another kilnd with the same host and URL, or "
                "two kilnd on one SQLite database?); it no longer acts as an owner",
                {{"conductor", id}});
      co_return;
    }
    Result<ConductorRecord> reg = co_await db.run([&] { return store.register_conductor(me()); });
    if (reg) {
      self_beat_at = before;
      log.warn("conductor registration was forgotten; registered again", {{"conductor", id}});
    }
  }

  asio::awaitable<void> refresh_view() {
    Result<std::vector<ConductorRecord>> rows = co_await db.run([&] { return store.list_conductors(); });
    if (!rows) {
      log.warn("conductors not read", {{"error", rows.error().message}});
      co_return;
    }
    // The first view (start()'s) is read by whoever starts after it; later
    // ones are announced when they change what ownership depends on.
    publish(build(*rows, clock.now_ms()), announcing);
    announcing = true;
  }

  asio::awaitable<void> loop() {
    while (!stopped) {
      timer.expires_after(opt.heartbeat());
      boost::system::error_code ec;
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopped) break;
      try {
        co_await refresh();
      } catch (const std::exception& e) {
        log.error("conductor heartbeat crashed", {{"error", e.what()}});
      }
    }
  }

  void end_loop() {
    stopped = true;
    asio::post(io, [self = shared_from_this()] { self->timer.cancel(); });
  }
};

Membership::Membership(asio::io_context& io, ConductorStore& store, BlockingPool& db, const Clock& clock,
                       MembershipOptions options, Logger log)
    : impl_(std::make_shared<Impl>(io, store, db, clock, std::move(options), std::move(log))) {}

Membership::~Membership() { impl_->end_loop(); }

const std::string& Membership::id() const { return impl_->id; }
bool Membership::sole() const { return impl_->opt.sole; }

void Membership::halt() { impl_->end_loop(); }

void Membership::set_api_url(std::string url) { impl_->opt.api_url = std::move(url); }

asio::awaitable<Status> Membership::start() {
  auto self = impl_;
  Status s = co_await self->start();
  co_return s;
}

asio::awaitable<void> Membership::refresh() {
  auto self = impl_;
  co_await self->refresh();
}

Status Membership::stop() {
  impl_->end_loop();
  Status s = impl_->store.stop_conductor(impl_->id);
  if (s) impl_->log.info("conductor stopped", {{"conductor", impl_->id}});
  return s;
}

std::shared_ptr<const RingView> Membership::view() const { return impl_->view(); }

void Membership::on_change(std::function<void()> listener) {
  std::lock_guard<std::mutex> l(impl_->view_mu);
  impl_->listeners.push_back(std::move(listener));
}

}  // namespace kiln
