#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include "controller/hosts/virtual_maker.h"
#include "controller/model/event_types.h"
#include "controller/model/node_allocation.h"
#include "controller/tenancy/allocation_engine_impl.h"

// AllocationEngine: driving an allocation's member nodes (allocation_engine.h).
// Each member is deployed while it waits in the pool, watched while its
// operation runs, replaced when it fails or leaves the pool, and, once the
// allocation is released, undeployed and let go when cleaning is over.

namespace kiln {

using namespace allocation_engine_detail;

MemberNeed allocation_engine_detail::member_need(const Node& n) {
  ProvisionState s = n.provision_state;
  if (s == ProvisionState::kAvailable) {
    if (n.maintenance || !n.fault.empty()) return MemberNeed::kReplace;
    return n.reservation.empty() ? MemberNeed::kDeploy : MemberNeed::kWait;
  }
  if (s == ProvisionState::kDeploying || s == ProvisionState::kValidating) return MemberNeed::kWait;
  if (s == ProvisionState::kActive) return MemberNeed::kServing;
  return MemberNeed::kReplace;
}

namespace {

// When the allocation entered its current state (history's last entry).
int64_t entered_at(const Allocation& a) { return a.history.empty() ? a.updated_at : a.history.back().at; }

std::string why_replaced(const Node& n) {
  std::string s = "node " + (n.name.empty() ? n.id : n.name) + " is " + std::string(to_string(n.provision_state));
  if (n.maintenance) s += " in maintenance";
  if (!n.last_error.empty()) s += ": " + n.last_error;
  return s;
}

}  // namespace

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
    if (!belongs_to(*n, a)) {
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

}  // namespace kiln
