#include "controller/tenancy/allocation_engine.h"

#include <algorithm>
#include <cassert>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

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

// Allocations reconciled at once: their pool hops and conductor calls
// overlap instead of queueing one after another behind the API's readers
// (bench/alloc_bench.py: one at a time, 100 tenants waited 4x longer for
// ready than direct deploys did). More wait in `reread` for a slot.
constexpr std::size_t kConcurrentReconciles = 64;

// Events read per list_events call, and at most per batch: past that a
// batch is a sweep (every allocation in flight, one call), which costs less
// than following so many events one by one.
constexpr int kEventsPerRead = 1000;
constexpr std::size_t kEventsPerBatch = 20000;

// A ready allocation whose every member serves it: nothing will change for
// it without an event (a member moved, a release, a renewal) or its lease
// end. Anything else is still moving.
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

// What a reconcile judges an allocation from, as one number: the
// allocation's version and state (every write to its row bumps the
// version), each member's node and status, and of each member's node what
// member_need, settled, replace and give_back look at (whether it exists,
// whom it belongs to, its state, maintenance, fault, whether an operation
// holds it). A step inside a node's operation changes none of these. The
// same number means the same judgement, so nothing to do again.
uint64_t fingerprint(const Allocation& a, const MemberNodes& members) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&h](std::string_view bytes) {
    for (unsigned char c : bytes) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // a field separator
    h *= 1099511628211ull;
  };
  mix(std::to_string(a.version));
  mix(to_string(a.state));
  for (const AllocationMember& m : a.members) {
    mix(m.node_id);
    mix(to_string(m.status));
    auto it = members.nodes.find(m.node_id);
    if (it == members.nodes.end()) {
      mix("gone");
      continue;
    }
    const Node& n = it->second;
    mix(n.allocation);
    mix(n.tenant);
    mix(to_string(n.provision_state));
    mix(n.maintenance ? "maintenance" : "");
    mix(n.fault.empty() ? "" : "fault");
    mix(n.reservation.empty() ? "" : "held");
  }
  return h;
}

// The member nodes of `a` (members that have not left) among `nodes`.
MemberNodes members_of(const Allocation& a, const std::map<std::string, const Node*>& nodes) {
  MemberNodes out;
  for (const AllocationMember& m : a.members) {
    if (m.status == MemberStatus::kLeft) continue;
    auto n = nodes.find(m.node_id);
    if (n != nodes.end()) out.nodes.emplace(m.node_id, *n->second);
  }
  return out;
}

// What one batch read in its store hop.
struct BatchRead {
  bool swept = false;
  int64_t cursor = 0;                         // the last event seq it covers
  std::set<std::string> named;                // allocations asked for by id (scoped reads)
  std::optional<AllocationsWithNodes> state;  // nullopt: nothing to read
};

// A lease that has ended, of an allocation that may still be released.
bool lease_over(int64_t expires_at, int64_t now_ms) { return expires_at > 0 && expires_at <= now_ms; }

// kPreconditionFailed: the allocation was written after the engine read it
// at `read` (it is at `version` now).
Error written_since(int64_t version, int64_t read) {
  return Error(Code::kPreconditionFailed, "allocation was written since it was read (version " +
                                              std::to_string(version) + ", read " + std::to_string(read) + ")");
}

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
  // A batch runs when kicked, or when the timer ran out at a deadline (a
  // sweep, a lease end); the first one, at start, is a sweep.
  bool due = true;
  while (!stopped) {
    if (due || kicked) {
      try {
        co_await batch();
      } catch (const std::exception& e) {
        log.error("allocation batch crashed", {{"error", e.what()}});
        cursor.reset();
        sweep_at = std::chrono::steady_clock::now() + opt.interval;
      }
    }
    // On the strand from here to the start of the wait: a kick's cancel runs
    // either before this look at the flag or after the wait began.
    if (stopped) break;
    auto now = std::chrono::steady_clock::now();
    // The sweep is a point in time, so that a stream of kicks cannot put it
    // off for ever.
    if (moving() && !sweep_at) sweep_at = now + opt.interval;
    if (kicked) continue;
    std::optional<std::chrono::steady_clock::time_point> next = next_due();
    const bool timed = next && *next <= now + opt.longest_sleep;
    wake.expires_at(timed ? *next : now + opt.longest_sleep);
    boost::system::error_code ec;
    co_await wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    // Cancelled: a kick (`kicked` is set), or a deadline moved (finished()):
    // look again. Ran out at nothing but the longest sleep: nothing is due,
    // so no batch (an idle engine makes no store call).
    due = !ec && timed;
  }
}

bool AllocationEngine::Impl::moving() const {
  if (!cursor) return true;
  // Another conductor's allocations are its to move: this one looks at them
  // again when the ring changes (ownership_moved), not every interval.
  for (const auto& [id, k] : known)
    if (k.mine && (!k.settled || !k.done)) return true;
  return false;
}

bool AllocationEngine::Impl::finished_since(const std::string& id, uint64_t read_from) const {
  auto it = last_finish.find(id);
  return it != last_finish.end() && it->second > read_from;
}

void AllocationEngine::Impl::forget_finishes() {
  // An entry matters only to a batch whose read began before it: none, once
  // every read in progress began after it.
  const uint64_t oldest = reading.empty() ? finishes : *reading.begin();
  std::erase_if(last_finish, [oldest](const auto& e) { return e.second <= oldest; });
}

void AllocationEngine::Impl::ownership_moved() {
  asio::post(strand, [self = shared_from_this()] {
    self->sweep_asked = true;
    self->kick();
  });
}

std::optional<std::chrono::steady_clock::time_point> AllocationEngine::Impl::next_due() const {
  std::optional<std::chrono::steady_clock::time_point> due;
  auto sooner = [&due](std::chrono::steady_clock::time_point t) {
    if (!due || t < *due) due = t;
  };
  const auto now = std::chrono::steady_clock::now();
  if (sweep_at && moving()) sooner(*sweep_at);
  // A lease end still ahead, of an allocation this conductor drives. One
  // already past is in hand: the batch at its end read it (a busy one is
  // read again as its reconcile ends), or its reap failed and waits for the
  // sweep.
  const int64_t now_ms = clock.now_ms();
  for (const auto& [id, k] : known)
    if (k.mine && k.expires_at > now_ms)
      sooner(now + std::chrono::milliseconds(std::min<int64_t>(k.expires_at - now_ms, opt.longest_sleep.count())));
  return due;
}

asio::awaitable<void> AllocationEngine::Impl::batch() {
  // Cleared before the read: an event committed from here on kicks again.
  kicked = false;
  ++passes;
  const auto now = std::chrono::steady_clock::now();
  const int64_t now_ms = clock.now_ms();
  // Leases that have ended are read again, whatever else happened. One whose
  // allocation is being reconciled is read, found busy and queued again
  // below: the end of that reconcile starts the batch that reaps it.
  for (const auto& [id, k] : known)
    if (k.mine && lease_over(k.expires_at, now_ms)) reread.insert(id);
  const bool sweep = !cursor || sweep_asked || (sweep_at && now >= *sweep_at);
  sweep_asked = false;
  // The hop owns copies: the strand's state stays on the strand.
  const int64_t since = cursor.value_or(0);
  const std::vector<std::string> again(reread.begin(), reread.end());
  reread.clear();
  // The reconciles that end from here until the hop returns may have
  // written after it read (see allocation_engine_impl.h): their ends are
  // kept until this batch has judged what it read.
  const uint64_t read_from = finishes;
  struct Reading {
    Reading(Impl& e, uint64_t from) : engine(e), at(e.reading.insert(from)) {}
    Reading(const Reading&) = delete;
    Reading& operator=(const Reading&) = delete;
    ~Reading() {
      engine.reading.erase(at);
      engine.forget_finishes();
    }
    Impl& engine;
    std::multiset<uint64_t>::iterator at;
  };
  const Reading reading_now(*this, read_from);
  Result<BatchRead> got = co_await db.run([&, sweep]() -> Result<BatchRead> {
    BatchRead r;
    auto read_all = [&]() -> Status {
      // The seq first: whatever commits after it is read again next time.
      Result<int64_t> last = events.last_event_seq();
      if (!last) return last.take_error();
      Result<AllocationsWithNodes> all = store.in_flight_with_nodes(std::nullopt);
      if (!all) return all.take_error();
      r.swept = true;
      r.cursor = *last;
      r.state = std::move(*all);
      return ok_status();
    };
    if (sweep) {
      if (Status s = read_all(); !s) return s.take_error();
      return r;
    }
    AllocationScope scope;
    std::set<std::string> nodes;
    r.cursor = since;
    std::size_t seen = 0;
    for (;;) {
      Result<std::vector<EventRecord>> page = events.list_events(r.cursor, kEventsPerRead, std::nullopt, std::nullopt);
      if (!page) return page.take_error();
      for (const EventRecord& e : *page) {
        r.cursor = std::max(r.cursor, e.seq);
        // A step inside a node's operation is written alone (the conductor's
        // step recorder): it changes nothing the engine judges.
        if (e.type == event_type::kProvisionStep) continue;
        if (e.detail.is_object()) {
          auto it = e.detail.find("allocation");
          if (it != e.detail.end() && it->is_string()) r.named.insert(it->get<std::string>());
        }
        if (!e.node_id.empty()) nodes.insert(e.node_id);
      }
      seen += page->size();
      if (page->size() < static_cast<std::size_t>(kEventsPerRead)) break;
      if (seen >= kEventsPerBatch) {
        // So many changes that reading everything is cheaper.
        if (Status s = read_all(); !s) return s.take_error();
        return r;
      }
    }
    r.named.insert(again.begin(), again.end());
    if (r.named.empty() && nodes.empty()) return r;
    scope.ids.assign(r.named.begin(), r.named.end());
    scope.node_ids.assign(nodes.begin(), nodes.end());
    Result<AllocationsWithNodes> some = store.in_flight_with_nodes(scope);
    if (!some) return some.take_error();
    r.state = std::move(*some);
    return r;
  });
  if (!got) {
    // Nothing is lost: the next batch is a sweep, `interval` from now.
    log.warn("allocations not read", {{"error", got.error().message}});
    cursor.reset();
    sweep_at = std::chrono::steady_clock::now() + opt.interval;
    co_return;
  }
  cursor = got->cursor;
  if (got->swept) sweep_at.reset();
  if (!got->state) co_return;

  // What left flight: on a sweep, everything not read; otherwise those asked
  // for by id and not found (released, or failed with every member gone).
  std::set<std::string> found;
  for (const Allocation& a : got->state->allocations) found.insert(a.id);
  for (auto it = known.begin(); it != known.end();) {
    bool asked = got->swept || got->named.contains(it->first);
    if (asked && !found.contains(it->first) && !busy.contains(it->first)) it = known.erase(it);
    else ++it;
  }

  std::map<std::string, const Node*> nodes;
  for (const Node& n : got->state->nodes) nodes.emplace(n.id, &n);
  // With several conductors, each allocation is driven (and its lease
  // reaped) by the owner of its id on the conductor ring alone; the others
  // leave it be, as they leave another's nodes.
  std::shared_ptr<const RingView> ring =
      conductor.membership() != nullptr ? conductor.membership()->view() : nullptr;
  bool read_late = false;
  for (Allocation& a : got->state->allocations) {
    if (finished_since(a.id, read_from)) {
      // Its last reconcile ended after this read began: the read may predate
      // that reconcile's writes. Judged again from a fresh read, at once.
      reread.insert(a.id);
      read_late = true;
      continue;
    }
    MemberNodes members = members_of(a, nodes);
    Known& k = known[a.id];
    k.mine = ring == nullptr || ring->is_mine(a.id);
    k.settled = settled(a, members);
    k.expires_at = a.expires_at > 0 && next_allocation_state(a.state, AllocationEvent::kRelease) ? a.expires_at : 0;
    if (!k.mine) {
      // Judged afresh should it become this conductor's.
      k.done.reset();
      continue;
    }
    const uint64_t print = fingerprint(a, members);
    if (k.done == print && !lease_over(k.expires_at, now_ms)) continue;  // nothing changed since it was last done
    if (stopped) continue;
    if (busy.contains(a.id) || busy.size() >= kConcurrentReconciles) {
      // Read again once a reconcile ends (finished() starts that batch).
      reread.insert(a.id);
      continue;
    }
    start_reconcile(std::move(a), std::move(members), print, k.ledger_closed);
  }
  if (read_late) kicked = true;
}

void AllocationEngine::Impl::start_reconcile(Allocation a, MemberNodes members, uint64_t print, bool ledger_closed) {
  busy.insert(a.id);
  ++reconciles;
  // The ticket is let go after finished() has run (a task destroyed unrun
  // lets it go too), and before the engine's last reference: run_pass
  // resumes only once the bookkeeping is done.
  struct Task {
    std::shared_ptr<Impl> self;
    WaitGroup::Ticket ticket;
  };
  std::string id = a.id;
  asio::co_spawn(
      io,
      [task = std::make_shared<Task>(Task{shared_from_this(), running.add()}), a = std::move(a),
       members = std::move(members), print, ledger_closed]() mutable -> asio::awaitable<void> {
        Outcome o;
        const int64_t judged_at = task->self->clock.now_ms();
        try {
          o = co_await task->self->reconcile(a, std::move(members), ledger_closed);
        } catch (const std::exception& e) {
          task->self->log.error("allocation reconcile crashed", {{"allocation", a.id}, {"error", e.what()}});
          o.done = false;
        }
        asio::post(task->self->strand, [task, id = a.id, print, judged_at, o] {
          task->self->finished(id, print, judged_at, o);
          task->ticket.reset();
        });
      },
      asio::detached);
}

void AllocationEngine::Impl::usage_closed(const std::string& id) {
  // Only for an allocation it knows: one the engine has not read yet (or
  // has forgotten) gets no entry, which would outlive it.
  asio::post(strand, [self = shared_from_this(), id] {
    auto it = self->known.find(id);
    if (it != self->known.end()) it->second.ledger_closed = true;
  });
}

void AllocationEngine::Impl::finished(const std::string& id, uint64_t print, int64_t judged_at, Outcome o) {
  busy.erase(id);
  ++finishes;
  // A batch reading now may hold a state from before this reconcile's
  // writes (allocation_engine_impl.h).
  if (!reading.empty()) last_finish[id] = finishes;
  auto it = known.find(id);
  if (it != known.end()) {
    Known& k = it->second;
    if (o.left_flight) {
      known.erase(it);
    } else {
      if (o.done) k.done = print;
      else k.done.reset();
      if (o.ledger_closed) k.ledger_closed = true;
      // Its lease ended after this reconcile judged it (the batch at the
      // lease end found it busy): read it again now, not at the next sweep.
      if (k.mine && lease_over(k.expires_at, clock.now_ms()) && k.expires_at > judged_at) reread.insert(id);
    }
  }
  // The loop's timer was set before this: look at the deadlines again.
  bool look_again = false;
  if (!o.done) {
    // What was left undone is tried again at the next sweep.
    if (!sweep_at) sweep_at = std::chrono::steady_clock::now() + opt.interval;
    look_again = true;
  }
  // Allocations that changed while this one ran, waited for a slot, or
  // whose lease ended meanwhile.
  if (!reread.empty()) kicked = true;
  if ((look_again || kicked) && !stopped) wake.cancel();
}

asio::awaitable<Outcome> AllocationEngine::Impl::reconcile(Allocation a, MemberNodes members, bool ledger_closed) {
  const int64_t now = clock.now_ms();
  Outcome out;
  if (a.expires_at > 0 && a.expires_at <= now && next_allocation_state(a.state, AllocationEvent::kRelease)) {
    std::string reason = "lease expired at " + format_rfc3339(a.expires_at);
    std::string actor = kEngineActor;
    std::string no_request;
    // Only as read: a lease renewed since is not reaped.
    Result<Allocation> r = co_await release_from(a, reason, actor, no_request, a.version);
    if (!r) co_return Outcome{.done = false};
    a = *r;
    // Its usage closed with the release.
    out.ledger_closed = true;
  }
  if (a.state == AllocationState::kPending) {
    std::string no_reason;
    Result<Allocation> r = co_await transition(a, AllocationEvent::kStart, no_reason);
    if (!r) co_return Outcome{.done = false};
    a = *r;
  }
  if (a.state == AllocationState::kProvisioning || a.state == AllocationState::kReady) {
    out.done = co_await drive_members(a, members);
  } else if (allocation_giving_back(a.state)) {
    Outcome given = co_await give_back(a, members, ledger_closed || out.ledger_closed);
    out.done = given.done;
    out.ledger_closed = out.ledger_closed || given.ledger_closed;
  }
  co_return out;
}

// Usage rows are the bill. A write the store cannot take now (its database
// unreachable, its disk full) is tried again, backing off from 200 ms to
// 2 s, until it lands or kilnd stops; open_usage and close_usage are
// idempotent (only rows not open open, only open rows close), so a retry
// after a commit that did land changes nothing. The times written are the
// ones captured before the first try: a late write bills the right seconds.
asio::awaitable<bool> AllocationEngine::Impl::ledger(const char* what, const std::string& allocation,
                                                     std::function<Status()> write) {
  auto pause = std::chrono::milliseconds(200);
  for (;;) {
    Status s = co_await db.run([&] { return write(); });
    if (s) co_return true;
    if (!store_down(s.error()) || stopped) {
      log.error(what, {{"allocation", allocation}, {"error", s.error().message}});
      co_return false;
    }
    log.warn("usage write waits for the store", {{"allocation", allocation}, {"error", s.error().message}});
    asio::steady_timer t(io);
    t.expires_after(pause);
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

asio::awaitable<Result<Allocation>> AllocationEngine::Impl::transition(Allocation a, AllocationEvent event,
                                                                       std::string reason) {
  const int64_t now = clock.now_ms();
  std::optional<AllocationState> to = next_allocation_state(a.state, event);
  if (!to) co_return Error(Code::kConflict, "allocation is " + std::string(to_string(a.state)));
  const AllocationState from = a.state;
  const AllocationState target = *to;
  EventDraft ev = allocation_event(a, event_type::kAllocationTransition);
  ev.from_state = std::string(to_string(from));
  ev.to_state = std::string(to_string(target));
  if (!reason.empty()) ev.detail["reason"] = reason;
  std::vector<EventDraft> events = {ev};
  // One hop: the price (read when billing starts) and the move, whose
  // transaction checks the allocation is still where it was read and
  // writes the usage rows the move opens or closes with it.
  Result<Allocation> r = co_await db.run([&]() -> Result<Allocation> {
    int64_t price = 0;
    if (event == AllocationEvent::kReady) {
      Result<Profile> p = catalogue.get_profile(a.profile);
      if (p) price = price_micros_per_second(p->doc, a.kind);
    }
    return store.update_allocation_with_usage(a.id, [&](Allocation& cur, LedgerWrites& usage) -> Status {
      if (cur.state != from) return Error(Code::kConflict, "allocation is " + std::string(to_string(cur.state)));
      // Judged from the allocation as read: a write since (a member
      // replaced, a lease renewed) may change that judgement.
      if (cur.version != a.version) return written_since(cur.version, a.version);
      if (event == AllocationEvent::kReleased) {
        // Billing ended when giving back began; the release or the failure
        // closed the rows then, and give_back again, but a close that did
        // not land must not leave a row open for good once nothing drives
        // the allocation (only open rows close).
        usage.close_at = entered_at(cur);
      }
      cur.history.push_back({now, std::string(to_string(from)), std::string(to_string(target)), reason});
      cur.state = target;
      if (event == AllocationEvent::kFail) {
        cur.last_error = reason;
        usage.close_at = now;  // billing ends with the request
      }
      if (event == AllocationEvent::kReady) {
        cur.last_error.clear();
        if (cur.ready_at == 0) cur.ready_at = now;
        // Billing starts at hand-off: a row per member not already billed
        // (a degraded allocation's remaining members keep theirs).
        for (const AllocationMember& m : cur.members) {
          if (m.status != MemberStatus::kMember) continue;
          UsageRecord u;
          u.allocation = cur.id;
          u.node_id = m.node_id;
          u.tenant = cur.tenant;
          u.profile = cur.profile;
          u.kind = cur.kind;
          u.started_at = now;
          u.price_micros_per_second = price;
          usage.open.push_back(u);
        }
      }
      return ok_status();
    }, events);
  });
  if (!r) co_return r;
  log.info("allocation transition", {{"allocation", r->id},
                                     {"from", std::string(to_string(from))},
                                     {"to", std::string(to_string(target))},
                                     {"reason", reason}});
  if (event == AllocationEvent::kReady && r->ready_at == now) record_ready(*r);
  if (event == AllocationEvent::kFail) usage_closed(r->id);
  co_return r;
}

asio::awaitable<Result<Allocation>> AllocationEngine::Impl::release(std::string id, std::string reason,
                                                                    std::string actor, std::string request_id) {
  Result<Allocation> cur = co_await db.run([&] { return store.get_allocation(id, ""); });
  if (!cur) co_return cur;
  co_return co_await release_from(std::move(*cur), std::move(reason), std::move(actor), std::move(request_id));
}

asio::awaitable<Result<Allocation>> AllocationEngine::Impl::release_from(Allocation cur, std::string reason,
                                                                         std::string actor, std::string request_id,
                                                                         std::optional<int64_t> version) {
  if (cur.state == AllocationState::kReleasing || cur.state == AllocationState::kReleased) co_return cur;
  const int64_t now = clock.now_ms();
  const AllocationState from = cur.state;
  EventDraft ev = allocation_event(cur, event_type::kAllocationTransition);
  ev.from_state = std::string(to_string(from));
  ev.to_state = std::string(to_string(AllocationState::kReleasing));
  ev.detail["reason"] = reason;
  ev.detail["actor"] = actor;
  ev.request_id = request_id;
  std::vector<EventDraft> events = {ev};
  const std::string aid = cur.id;
  // The move and the end of its usage, in one transaction.
  Result<Allocation> r = co_await db.run([&] {
    return store.update_allocation_with_usage(aid, [&](Allocation& a, LedgerWrites& usage) -> Status {
      std::optional<AllocationState> to = next_allocation_state(a.state, AllocationEvent::kRelease);
      if (a.state != from || !to) return Error(Code::kConflict, "allocation is " + std::string(to_string(a.state)));
      if (version && a.version != *version) return written_since(a.version, *version);
      a.history.push_back({now, std::string(to_string(a.state)), std::string(to_string(*to)), reason});
      a.state = *to;
      usage.close_at = now;
      return ok_status();
    }, events);
  });
  if (!r) {
    // Lost a race (another release, or a move since it was read): answer
    // with what is there now, releasing it if it still can be. The reaper
    // (`version`) judges again from a fresh read instead.
    if (r.error().code != Code::kConflict || version) co_return r;
    Result<Allocation> now_is = co_await db.run([&] { return store.get_allocation(aid, ""); });
    if (!now_is || now_is->state == from) co_return now_is;
    co_return co_await release_from(std::move(*now_is), std::move(reason), std::move(actor), std::move(request_id));
  }
  log.info("allocation releasing", {{"allocation", aid}, {"reason", reason}, {"actor", actor}});
  usage_closed(aid);
  kick();
  co_return r;
}

asio::awaitable<bool> AllocationEngine::Impl::note_error(Allocation& a, std::string error) {
  std::vector<EventDraft> none;
  const std::string id = a.id;
  Result<Allocation> r = co_await db.run([&] {
    return store.update_allocation_if(id, std::nullopt, [&](Allocation& cur) -> Status {
      if (cur.last_error == error) return Error(Code::kConflict, "unchanged");
      cur.last_error = error;
      return ok_status();
    }, none);
  });
  // The moves that follow in this reconcile check the version it wrote.
  if (r && r->version == a.version + 1) {
    a.version = r->version;
    a.last_error = error;
  }
  co_return r || r.error().code == Code::kConflict;
}

void AllocationEngine::Impl::record_ready(const Allocation& a) {
  int64_t ms = std::max<int64_t>(0, a.ready_at - a.created_at);
  std::lock_guard<std::mutex> lock(hist_mu);
  for (std::size_t i = 0; i < std::size(kTimeToReadyBucketsMs); ++i)
    if (ms <= kTimeToReadyBucketsMs[i]) ready_hist.buckets[i]++;
  ready_hist.count++;
  ready_hist.sum_ms += ms;
}

AllocationEngine::AllocationEngine(asio::io_context& io, AllocationEngineStores stores, BlockingPool& db,
                                   Conductor& conductor, const Clock& clock, AllocationEngineOptions options,
                                   Logger log)
    : impl_(std::make_shared<Impl>(io, stores, db, conductor, clock, options, std::move(log))) {}

AllocationEngine::AllocationEngine(asio::io_context& io, NodeStore& store, BlockingPool& db, Conductor& conductor,
                                   const Clock& clock, AllocationEngineOptions options, Logger log)
    : AllocationEngine(io, AllocationEngineStores{store, store, store}, db, conductor, clock, options,
                       std::move(log)) {}

AllocationEngine::~AllocationEngine() { stop(); }

void AllocationEngine::start() {
  auto self = impl_;
  // Ownership moves only when the ring changes: a sweep then finds what
  // this conductor drives now. The listener outlives the engine.
  assert(impl_->opt.membership == impl_->conductor.membership());
  if (Membership* m = impl_->opt.membership) {
    std::weak_ptr<Impl> weak = impl_;
    m->on_change([weak] {
      if (std::shared_ptr<Impl> engine = weak.lock()) engine->ownership_moved();
    });
  }
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
  co_await asio::co_spawn(self->strand, [self]() { return self->batch(); }, asio::use_awaitable);
  co_await self->running.wait();
}

uint64_t AllocationEngine::passes() const { return impl_->passes.load(); }

uint64_t AllocationEngine::reconciles() const { return impl_->reconciles.load(); }

TimeToReady AllocationEngine::time_to_ready() const {
  std::lock_guard<std::mutex> lock(impl_->hist_mu);
  return impl_->ready_hist;
}

}  // namespace kiln
