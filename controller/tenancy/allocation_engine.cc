#include "controller/tenancy/allocation_engine.h"

#include <algorithm>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/wait_group.h"
#include "controller/conductor/membership.h"
#include "controller/model/event_types.h"
#include "controller/store/store_down.h"
#include "controller/tenancy/allocation_engine_impl.h"
#include "controller/tenancy/usage.h"

namespace kiln {

using namespace allocation_engine_detail;

EventDraft allocation_engine_detail::allocation_event(const Allocation& a, const std::string& type) {
  EventDraft e;
  e.type = type;
  e.tenant = a.tenant;
  e.detail = {{"allocation", a.id}, {"allocation_name", a.name}};
  return e;
}

namespace {

// Allocations reconciled at once in a pass.
constexpr int kConcurrentReconciles = 64;

// A ready allocation whose every member serves it: a pass would do nothing
// for it, and nothing will change for it without an event (a member moved,
// a release, a renewal) or its lease end. Anything else is still moving.
bool settled(const Allocation& a, const MemberNodes& members) {
  if (a.state != AllocationState::kReady) return false;
  int64_t serving = 0;
  for (const AllocationMember& m : a.members) {
    if (m.status == MemberStatus::kLeft) continue;
    if (m.status != MemberStatus::kMember) return false;
    Result<Node> n = members.get(m.node_id);
    if (!n || n->allocation != a.id || n->tenant != a.tenant || member_need(*n) != MemberNeed::kServing) return false;
    ++serving;
  }
  return serving == a.count;
}

// The longest the loop sleeps on one deadline (a lease years away is
// simply looked at again then).
constexpr std::chrono::hours kLongestSleep{24};

}  // namespace

void AllocationEngine::Impl::kick() {
  // One cancel per run of kicks: while `kicked` is set, a cancel is on its
  // way or the loop will look at the flag before it sleeps again.
  if (!kicked.exchange(true)) interrupt();
}

void AllocationEngine::Impl::interrupt() {
  asio::post(strand, [self = shared_from_this()] { self->wake.cancel(); });
}

asio::awaitable<void> AllocationEngine::Impl::loop() {
  while (!stopped) {
    std::optional<std::chrono::steady_clock::time_point> due;
    try {
      due = co_await pass();
    } catch (const std::exception& e) {
      log.error("allocation pass crashed", {{"error", e.what()}});
      due = std::chrono::steady_clock::now() + opt.interval;
    }
    // On the strand from here to the start of the wait: a kick's cancel runs
    // either before this look at the flag or after the wait began.
    if (stopped) break;
    if (kicked) continue;
    auto now = std::chrono::steady_clock::now();
    wake.expires_at(due ? std::min(*due, now + kLongestSleep) : now + kLongestSleep);
    boost::system::error_code ec;
    co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

asio::awaitable<std::optional<std::chrono::steady_clock::time_point>> AllocationEngine::Impl::pass() {
  // Cleared before the read: an event committed from here on kicks again.
  kicked = false;
  ++passes;
  std::optional<std::chrono::steady_clock::time_point> due;
  MemberNodes members;
  Result<std::vector<Allocation>> live = co_await db.run([&]() -> Result<std::vector<Allocation>> {
    Result<std::vector<Allocation>> all = store.allocations_in_flight();
    if (!all) return all;
    for (const Allocation& a : *all)
      for (const AllocationMember& m : a.members) {
        if (m.status == MemberStatus::kLeft) continue;
        Result<Node> n = store.get_node(m.node_id);
        if (n) members.nodes.emplace(m.node_id, std::move(*n));
        else if (n.error().code != Code::kNotFound) return n.take_error();
      }
    return all;
  });
  if (!live) {
    log.warn("allocations not read", {{"error", live.error().message}});
    co_return std::chrono::steady_clock::now() + opt.interval;
  }
  // Allocations are independent (every write is conditional, per allocation
  // or per node), so up to kConcurrentReconciles of them move at once: their
  // pool hops and conductor calls overlap instead of queueing one after
  // another behind the API's readers (bench/alloc_bench.py: one at a time,
  // 100 tenants waited 4x longer for ready than direct deploys did).
  WaitGroup running;
  auto self = shared_from_this();
  // With several conductors, each allocation is driven (and its lease
  // reaped) by the owner of its id on the conductor ring alone; the others
  // leave it be, as they leave another's nodes.
  std::shared_ptr<const RingView> ring =
      conductor.membership() != nullptr ? conductor.membership()->view() : nullptr;
  // The next pass due without a kick, judged from what this pass read
  // (every allocation, mine or not: a lease whose owner died still ends).
  const int64_t now_ms = clock.now_ms();
  const auto now = std::chrono::steady_clock::now();
  auto sooner = [&due](std::chrono::steady_clock::time_point t) {
    if (!due || t < *due) due = t;
  };
  for (const Allocation& a : *live) {
    const bool mine = ring == nullptr || ring->is_mine(a.id);
    if (a.expires_at > 0 && next_allocation_state(a.state, AllocationEvent::kRelease))
      sooner(now + std::chrono::milliseconds(std::clamp<int64_t>(
                       a.expires_at - now_ms, 0, std::chrono::milliseconds(kLongestSleep).count())));
    if (!mine || !settled(a, members)) sooner(now + opt.interval);
  }
  for (const Allocation& a : *live) {
    if (stopped) break;
    if (ring != nullptr && !ring->is_mine(a.id)) continue;
    co_await running.wait_below(kConcurrentReconciles);
    // The ticket goes with the task's frame, after its last use of `members`.
    asio::co_spawn(
        io,
        [self, a, &members, ticket = running.add()]() -> asio::awaitable<void> {
          try {
            co_await self->reconcile(a, members);
          } catch (const std::exception& e) {
            self->log.error("allocation reconcile crashed", {{"allocation", a.id}, {"error", e.what()}});
          }
        },
        asio::detached);
  }
  // `members` lives in this frame: wait for every reconcile.
  co_await running.wait();
  co_return due;
}

asio::awaitable<void> AllocationEngine::Impl::reconcile(Allocation a, const MemberNodes& members) {
  const int64_t now = clock.now_ms();
  if (a.expires_at > 0 && a.expires_at <= now && next_allocation_state(a.state, AllocationEvent::kRelease)) {
    std::string reason = "lease expired at " + format_rfc3339(a.expires_at);
    std::string actor = kEngineActor;
    std::string no_request;
    Result<Allocation> r = co_await release(a.id, reason, actor, no_request);
    if (!r) co_return;
    a = *r;
  }
  if (a.state == AllocationState::kPending) {
    std::string no_reason;
    Result<Allocation> r = co_await transition(a.id, AllocationEvent::kStart, no_reason);
    if (!r) co_return;
    a = *r;
  }
  if (a.state == AllocationState::kProvisioning || a.state == AllocationState::kReady) {
    co_await drive_members(a, members);
  } else if (allocation_giving_back(a.state)) {
    co_await give_back(a, members);
  }
}

// Usage rows are the bill. A write the store cannot take now (its database
// unreachable, its disk full) is tried again, backing off from 200 ms to
// 2 s, until it lands or kilnd stops; open_usage and close_usage are
// idempotent (only rows not open open, only open rows close), so a retry
// after a commit that did land changes nothing. The times written are the
// ones captured before the first try: a late write bills the right seconds.
asio::awaitable<void> AllocationEngine::Impl::ledger(const char* what, const std::string& allocation,
                                                     std::function<Status()> write) {
  auto pause = std::chrono::milliseconds(200);
  for (;;) {
    Status s = co_await db.run([&] { return write(); });
    if (s) co_return;
    if (!store_down(s.error()) || stopped) {
      log.error(what, {{"allocation", allocation}, {"error", s.error().message}});
      co_return;
    }
    log.warn("usage write waits for the store", {{"allocation", allocation}, {"error", s.error().message}});
    asio::steady_timer t(io);
    t.expires_after(pause);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

asio::awaitable<Result<Allocation>> AllocationEngine::Impl::transition(std::string id, AllocationEvent event,
                                                                       std::string reason) {
  int64_t now = clock.now_ms();
  std::string from_name;
  std::string to_name;
  // The event is built inside the mutation, from the state read in the
  // transaction; a state that no longer allows `event` aborts the write.
  std::vector<EventDraft> events;
  Result<Allocation> before = co_await db.run([&] { return store.get_allocation(id, ""); });
  if (!before) co_return before;
  std::optional<AllocationState> to = next_allocation_state(before->state, event);
  if (!to) co_return Error(Code::kConflict, "allocation is " + std::string(to_string(before->state)));
  AllocationState from = before->state;
  EventDraft ev = allocation_event(*before, event_type::kAllocationTransition);
  ev.from_state = std::string(to_string(from));
  ev.to_state = std::string(to_string(*to));
  if (!reason.empty()) ev.detail["reason"] = reason;
  events.push_back(ev);
  AllocationState target = *to;
  int64_t version = before->version;
  Result<Allocation> r = co_await db.run([&] {
    return store.update_allocation_if(id, version, [&](Allocation& a) {
      a.history.push_back({now, std::string(to_string(a.state)), std::string(to_string(target)), reason});
      a.state = target;
      if (event == AllocationEvent::kFail) a.last_error = reason;
      if (event == AllocationEvent::kReady) {
        a.last_error.clear();
        if (a.ready_at == 0) a.ready_at = now;
      }
      return ok_status();
    }, events);
  });
  if (!r) co_return r;
  log.info("allocation transition", {{"allocation", r->id},
                                     {"from", std::string(to_string(from))},
                                     {"to", std::string(to_string(target))},
                                     {"reason", reason}});
  if (event == AllocationEvent::kReady) {
    // Billing starts at hand-off: one row per member not already billed.
    Allocation ready = *r;
    std::string profile_name = ready.profile;
    Result<Profile> p = co_await db.run([&] { return store.get_profile(profile_name); });
    int64_t price = p ? price_micros_per_second(p->doc, ready.kind) : 0;
    std::vector<UsageRecord> rows;
    for (const AllocationMember& m : ready.members) {
      if (m.status != MemberStatus::kMember) continue;
      UsageRecord u;
      u.allocation = ready.id;
      u.node_id = m.node_id;
      u.tenant = ready.tenant;
      u.profile = ready.profile;
      u.kind = ready.kind;
      u.started_at = now;
      u.price_micros_per_second = price;
      rows.push_back(u);
    }
    co_await ledger("usage not opened", ready.id, [&] { return store.open_usage(rows); });
    if (ready.history.size() >= 1 && ready.ready_at == now) record_ready(ready);
  }
  co_return r;
}

asio::awaitable<Result<Allocation>> AllocationEngine::Impl::release(std::string id, std::string reason,
                                                                    std::string actor, std::string request_id) {
  Result<Allocation> cur = co_await db.run([&] { return store.get_allocation(id, ""); });
  if (!cur) co_return cur;
  if (cur->state == AllocationState::kReleasing || cur->state == AllocationState::kReleased) co_return cur;
  int64_t now = clock.now_ms();
  AllocationState from = cur->state;
  EventDraft ev = allocation_event(*cur, event_type::kAllocationTransition);
  ev.from_state = std::string(to_string(from));
  ev.to_state = std::string(to_string(AllocationState::kReleasing));
  ev.detail["reason"] = reason;
  ev.detail["actor"] = actor;
  ev.request_id = request_id;
  std::vector<EventDraft> events = {ev};
  std::string aid = cur->id;
  Result<Allocation> r = co_await db.run([&] {
    return store.update_allocation_if(aid, std::nullopt, [&](Allocation& a) -> Status {
      std::optional<AllocationState> to = next_allocation_state(a.state, AllocationEvent::kRelease);
      if (!to) return Error(Code::kConflict, "allocation is " + std::string(to_string(a.state)));
      a.history.push_back({now, std::string(to_string(a.state)), std::string(to_string(*to)), reason});
      a.state = *to;
      return ok_status();
    }, events);
  });
  if (!r) {
    // Lost a race with another release: answer with what is there now.
    if (r.error().code == Code::kConflict) co_return co_await db.run([&] { return store.get_allocation(aid, ""); });
    co_return r;
  }
  // Detached: the caller's answer does not wait for a store that is down.
  asio::co_spawn(
      io,
      [self = shared_from_this(), aid, now]() -> asio::awaitable<void> {
        co_await self->ledger("usage not closed", aid, [self, aid, now] { return self->store.close_usage(aid, "", now); });
      },
      asio::detached);
  log.info("allocation releasing", {{"allocation", aid}, {"reason", reason}, {"actor", actor}});
  kick();
  co_return r;
}

asio::awaitable<void> AllocationEngine::Impl::note_error(std::string id, std::string error) {
  std::vector<EventDraft> none;
  Result<Allocation> r = co_await db.run([&] {
    return store.update_allocation_if(id, std::nullopt, [&](Allocation& a) -> Status {
      if (a.last_error == error) return Error(Code::kConflict, "unchanged");
      a.last_error = error;
      return ok_status();
    }, none);
  });
  (void)r;
}

void AllocationEngine::Impl::record_ready(const Allocation& a) {
  int64_t ms = std::max<int64_t>(0, a.ready_at - a.created_at);
  std::lock_guard<std::mutex> lock(hist_mu);
  for (std::size_t i = 0; i < std::size(kTimeToReadyBucketsMs); ++i)
    if (ms <= kTimeToReadyBucketsMs[i]) ready_hist.buckets[i]++;
  ready_hist.count++;
  ready_hist.sum_ms += ms;
}

AllocationEngine::AllocationEngine(asio::io_context& io, NodeStore& store, BlockingPool& db, Conductor& conductor,
                                   const Clock& clock, AllocationEngineOptions options, Logger log)
    : impl_(std::make_shared<Impl>(io, store, db, conductor, clock, options, std::move(log))) {}

AllocationEngine::~AllocationEngine() { stop(); }

void AllocationEngine::start() {
  auto self = impl_;
  asio::co_spawn(impl_->strand, [self]() { return self->loop(); }, asio::detached);
}

void AllocationEngine::stop() {
  impl_->stopped = true;
  impl_->interrupt();
}

void AllocationEngine::kick() { impl_->kick(); }

asio::awaitable<Result<Allocation>> AllocationEngine::release(std::string id, std::string reason, std::string actor,
                                                              std::string request_id) {
  return impl_->release(std::move(id), std::move(reason), std::move(actor), std::move(request_id));
}

asio::awaitable<void> AllocationEngine::run_pass() {
  auto self = impl_;
  auto due = co_await self->pass();
  (void)due;
}

uint64_t AllocationEngine::passes() const { return impl_->passes.load(); }

TimeToReady AllocationEngine::time_to_ready() const {
  std::lock_guard<std::mutex> lock(impl_->hist_mu);
  return impl_->ready_hist;
}

}  // namespace kiln
