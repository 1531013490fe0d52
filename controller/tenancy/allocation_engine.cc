#include "controller/tenancy/allocation_engine.h"

#include <algorithm>
#include <atomic>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/wait_group.h"
#include "controller/conductor/membership.h"

#include "controller/hosts/virtual_maker.h"
#include "controller/model/allocation_states.h"
#include "controller/store/store_down.h"
#include "controller/tenancy/usage.h"
#include "controller/model/event_types.h"
#include "controller/store/store.h"

namespace kiln {

namespace {

using json = nlohmann::json;

constexpr const char kEngineActor[] = "allocation-engine";
// Allocations reconciled at once in a pass.
constexpr int kConcurrentReconciles = 64;

Actor engine_actor(const std::string& request_id) {
  return Actor{"", kEngineActor, "admin", request_id};
}

EventDraft allocation_event(const Allocation& a, const std::string& type) {
  EventDraft e;
  e.type = type;
  e.tenant = a.tenant;
  e.detail = {{"allocation", a.id}, {"allocation_name", a.name}};
  return e;
}

// What a member's node needs, judged from the node alone.
enum class MemberNeed {
  kDeploy,    // claimed and still in the pool: deploy it
  kWait,      // its operation is running
  kServing,   // active
  kReplace,   // failed, out of the pool, or in maintenance before deploy
};

MemberNeed member_need(const Node& n) {
  ProvisionState s = n.provision_state;
  if (s == ProvisionState::kAvailable) {
    if (n.maintenance || !n.fault.empty()) return MemberNeed::kReplace;
    return n.reservation.empty() ? MemberNeed::kDeploy : MemberNeed::kWait;
  }
  if (s == ProvisionState::kDeploying || s == ProvisionState::kValidating) return MemberNeed::kWait;
  if (s == ProvisionState::kActive) return MemberNeed::kServing;
  return MemberNeed::kReplace;
}

std::string why_replaced(const Node& n) {
  std::string s = "node " + (n.name.empty() ? n.id : n.name) + " is " + std::string(to_string(n.provision_state));
  if (n.maintenance) s += " in maintenance";
  if (!n.last_error.empty()) s += ": " + n.last_error;
  return s;
}

// The member nodes of every allocation in flight, read with the allocations
// in one call on the pool at the start of a pass: one hop instead of one per
// member (with 100 allocations of 5, a pass made 500 pool hops that queued
// behind the API's readers). A node missing here was deleted. Acting on a
// view a few milliseconds old is safe: every write the engine makes is
// conditional (the conductor's reservation, update_allocation_if).
struct MemberNodes {
  std::map<std::string, Node> nodes;

  // kNotFound when the node is gone.
  Result<Node> get(const std::string& id) const {
    auto it = nodes.find(id);
    if (it == nodes.end()) return Error(Code::kNotFound, "node " + id + " not found");
    return it->second;
  }
};

// When the allocation entered its current state (history's last entry).
int64_t entered_at(const Allocation& a) { return a.history.empty() ? a.updated_at : a.history.back().at; }

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

struct AllocationEngine::Impl : std::enable_shared_from_this<AllocationEngine::Impl> {
  Impl(asio::io_context& io_, NodeStore& store_, BlockingPool& db_, Conductor& conductor_, const Clock& clock_,
       AllocationEngineOptions opt_, Logger log_)
      : io(io_), store(store_), db(db_), conductor(conductor_), clock(clock_), opt(opt_), log(std::move(log_)),
        strand(asio::make_strand(io_)), wake(strand) {
    ready_hist.buckets.assign(std::size(kTimeToReadyBucketsMs), 0);
  }

  asio::io_context& io;
  NodeStore& store;
  BlockingPool& db;
  Conductor& conductor;
  const Clock& clock;
  AllocationEngineOptions opt;
  Logger log;
  // The loop runs here; `wake` (its sleep) is touched only here, so the
  // cancel a kick posts cannot slip between the loop's look at `kicked` and
  // the start of its wait.
  asio::strand<asio::io_context::executor_type> strand;
  asio::steady_timer wake;
  std::atomic<bool> stopped{false};
  // Set by kick() before it posts the cancel; cleared as a pass begins.
  std::atomic<bool> kicked{false};
  std::atomic<uint64_t> passes{0};
  mutable std::mutex hist_mu;
  TimeToReady ready_hist;

  void kick();
  void interrupt();
  asio::awaitable<void> loop();
  // One pass; returns when the next one is due without a kick (nullopt:
  // only a kick).
  asio::awaitable<std::optional<std::chrono::steady_clock::time_point>> pass();
  asio::awaitable<void> reconcile(Allocation a, const MemberNodes& members);
  asio::awaitable<void> drive_members(Allocation a, const MemberNodes& members);
  asio::awaitable<void> give_back(Allocation a, const MemberNodes& members);
  // Replaces member `n`; false when the allocation failed instead.
  asio::awaitable<bool> replace(Allocation a, Node n, std::string reason);
  asio::awaitable<Result<Allocation>> transition(std::string id, AllocationEvent event, std::string reason);
  asio::awaitable<Result<Allocation>> release(std::string id, std::string reason, std::string actor,
                                              std::string request_id);
  asio::awaitable<void> note_error(std::string id, std::string error);
  asio::awaitable<void> ledger(const char* what, const std::string& allocation, std::function<Status()> write);
  asio::awaitable<void> leave(const Allocation& a, const std::string& node_id, MemberStatus status,
                              std::string reason);
  void record_ready(const Allocation& a);
};

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

asio::awaitable<void> AllocationEngine::Impl::drive_members(Allocation a, const MemberNodes& members) {
  bool all_serving = true;
  int64_t serving = 0;
  std::string problem;
  for (const AllocationMember& m : a.members) {
    if (m.status != MemberStatus::kMember) continue;
    std::string node_id = m.node_id;
    Result<Node> n = members.get(node_id);
    if (!n) {
      if (n.error().code != Code::kNotFound) co_return;  // the store is unwell: next pass
      Node gone;
      gone.id = node_id;
      gone.name = node_id;
      std::string why = "node " + node_id + " was deleted";
      bool replaced = co_await replace(a, gone, why);
      if (!replaced) co_return;
      all_serving = false;
      continue;
    }
    if (n->allocation != a.id || n->tenant != a.tenant) {
      std::string why = "node " + (n->name.empty() ? n->id : n->name) + " was taken out of the allocation";
      Node taken = *n;
      bool replaced = co_await replace(a, taken, why);
      if (!replaced) co_return;
      all_serving = false;
      continue;
    }
    MemberNeed need = member_need(*n);
    if (need == MemberNeed::kServing) {
      ++serving;
      continue;
    }
    all_serving = false;
    if (need == MemberNeed::kReplace) {
      std::string why = why_replaced(*n);
      Node failed = *n;
      bool replaced = co_await replace(a, failed, why);
      if (!replaced) co_return;
      continue;
    }
    if (need == MemberNeed::kDeploy) {
      ProvisionArgs args;
      args.image = a.image;
      args.allocation = a.id;
      Actor actor = engine_actor("");
      Result<Node> d = co_await conductor.provision(n->id, ProvisionEvent::kDeploy, args, actor);
      if (!d) {
        // Bad input (the image went away or stopped being usable) will not
        // get better by retrying: the allocation fails. Anything else (busy)
        // is tried again on the next pass.
        if (d.error().code == Code::kInvalidArgument) {
          std::string why = "deploy refused: " + d.error().message;
          Result<Allocation> f = co_await transition(a.id, AllocationEvent::kFail, why);
          (void)f;
          co_return;
        }
        problem = "deploying " + (n->name.empty() ? n->id : n->name) + ": " + d.error().message;
      }
    }
  }
  if (!problem.empty()) co_await note_error(a.id, problem);
  if (all_serving && serving == a.count) {
    if (a.state == AllocationState::kProvisioning) {
      std::string no_reason;
      Result<Allocation> r = co_await transition(a.id, AllocationEvent::kReady, no_reason);
      (void)r;
    }
  } else if (a.state == AllocationState::kReady) {
    std::string why = "a member is being replaced";
    Result<Allocation> r = co_await transition(a.id, AllocationEvent::kDegrade, why);
    (void)r;
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

asio::awaitable<bool> AllocationEngine::Impl::replace(Allocation a, Node n, std::string reason) {
  // Billing for this node stops now, whatever happens next.
  std::string aid = a.id;
  std::string nid = n.id;
  int64_t now = clock.now_ms();
  co_await ledger("usage not closed", aid, [&] { return store.close_usage(aid, nid, now); });
  // Give the node back through cleaning when it carries the tenant's image;
  // a quarantined or otherwise failed node stays where it is, with its
  // reason, for an operator.
  if (n.provision_state == ProvisionState::kDeployFailed && n.reservation.empty() && n.allocation == a.id) {
    ProvisionArgs none;
    Actor actor = engine_actor("");
    Result<Node> u = co_await conductor.provision(n.id, ProvisionEvent::kUndeploy, none, actor);
    if (!u) log.warn("replaced member not undeployed", {{"node", n.id}, {"error", u.error().message}});
  }
  EventDraft ev = allocation_event(a, event_type::kAllocationMemberReplaced);
  ev.node_id = n.id;
  ev.detail["reason"] = reason;
  std::vector<EventDraft> events = {ev};
  std::string why = "replaced: " + reason;
  Result<Allocation> r = co_await db.run([&]() -> Result<Allocation> {
    Result<std::optional<VirtualNodeMaker>> vms = guest_maker(store, a);
    if (!vms) return vms.take_error();
    return store.leave_member(aid, nid, MemberStatus::kLeft, why, /*replace=*/true, events, *vms ? &**vms : nullptr);
  });
  if (r) {
    log.info("allocation member replaced", {{"allocation", a.id}, {"node", n.id}, {"reason", reason}});
    co_return true;
  }
  if (r.error().code != Code::kConflict) co_return false;  // store trouble: next pass
  // Nothing can take its place: the allocation fails, and the failed member
  // leaves with the others as the failed allocation is given back.
  std::string failure = reason + "; no replacement: " + r.error().message;
  Result<Allocation> f = co_await transition(a.id, AllocationEvent::kFail, failure);
  (void)f;
  co_return false;
}

asio::awaitable<void> AllocationEngine::Impl::give_back(Allocation a, const MemberNodes& members) {
  // Usage ends when giving back starts (idempotent: only open rows close).
  std::string aid = a.id;
  int64_t since = entered_at(a);
  co_await ledger("usage not closed", aid, [&] { return store.close_usage(aid, "", since); });
  bool all_left = true;
  std::string problem;
  for (const AllocationMember& m : a.members) {
    if (m.status == MemberStatus::kLeft) continue;
    all_left = false;
    std::string node_id = m.node_id;
    Result<Node> n = members.get(node_id);
    if (!n) {
      if (n.error().code == Code::kNotFound) {
        std::string why = "node was deleted";
        co_await leave(a, node_id, MemberStatus::kLeft, why);
      }
      continue;
    }
    bool ours = (n->allocation == a.id || n->allocation.empty()) && n->tenant == a.tenant;
    if (!ours) {
      std::string why = "no longer the allocation's";
      co_await leave(a, node_id, MemberStatus::kLeft, why);
      continue;
    }
    ProvisionState s = n->provision_state;
    bool cleaning = s == ProvisionState::kCleaning || s == ProvisionState::kBurningIn;
    if (m.status == MemberStatus::kLeaving) {
      // Undeployed: it leaves once cleaning is over, whichever way it ended.
      if (cleaning) continue;
      std::string how = s == ProvisionState::kAvailable ? std::string("released, cleaned")
                                                        : "released; node is " + std::string(to_string(s)) +
                                                              (n->last_error.empty() ? "" : ": " + n->last_error);
      co_await leave(a, node_id, MemberStatus::kLeft, how);
      continue;
    }
    if (s == ProvisionState::kAvailable && n->reservation.empty()) {
      // Claimed but never deployed: nothing of the tenant's is on it.
      std::string why = "released before deploy";
      co_await leave(a, node_id, MemberStatus::kLeft, why);
      continue;
    }
    Actor actor = engine_actor("");
    ProvisionArgs none;
    // A conflict means the node moved on since it was read (a deploy that
    // reached active as the abort came): no problem, the next pass acts on
    // the state it is in then. Anything else is the allocation's last_error.
    if (s == ProvisionState::kDeploying || s == ProvisionState::kValidating) {
      Result<Node> ab = co_await conductor.provision(n->id, ProvisionEvent::kAbort, none, actor);
      if (!ab && ab.error().code != Code::kConflict) problem = "aborting " + n->id + ": " + ab.error().message;
      continue;  // deploy_failed next pass, then undeployed
    }
    if (s == ProvisionState::kActive || s == ProvisionState::kDeployFailed) {
      Result<Node> u = co_await conductor.provision(n->id, ProvisionEvent::kUndeploy, none, actor);
      if (!u) {
        if (u.error().code != Code::kConflict) problem = "undeploying " + n->id + ": " + u.error().message;
        continue;
      }
      std::string why = "undeploying";
      co_await leave(a, node_id, MemberStatus::kLeaving, why);
      continue;
    }
    if (cleaning) {
      std::string why = "cleaning";
      co_await leave(a, node_id, MemberStatus::kLeaving, why);
      continue;
    }
    // Quarantined, a failed state, manageable...: out of the pool already;
    // an operator decides what it needs. Available with a reservation: an
    // on-demand validation or power action; wait for it.
    if (s == ProvisionState::kAvailable) continue;
    std::string why = "released; node is " + std::string(to_string(s));
    co_await leave(a, node_id, MemberStatus::kLeft, why);
  }
  if (!problem.empty()) co_await note_error(a.id, problem);
  if (all_left && a.state == AllocationState::kReleasing) {
    std::string no_reason;
    Result<Allocation> r = co_await transition(a.id, AllocationEvent::kReleased, no_reason);
    (void)r;
  }
}

asio::awaitable<void> AllocationEngine::Impl::leave(const Allocation& a, const std::string& node_id,
                                                    MemberStatus status, std::string reason) {
  std::string aid = a.id;
  std::vector<EventDraft> none;
  Result<Allocation> r =
      co_await db.run([&] { return store.leave_member(aid, node_id, status, reason, /*replace=*/false, none, nullptr); });
  if (!r) log.warn("member not released", {{"allocation", aid}, {"node", node_id}, {"error", r.error().message}});
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
