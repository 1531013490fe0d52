#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "controller/hosts/virtual_maker.h"
#include "controller/model/event_types.h"
#include "controller/model/node_allocation.h"
#include "common/wait_group.h"
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

int64_t allocation_engine_detail::entered_at(const Allocation& a) {
  return a.history.empty() ? a.updated_at : a.history.back().at;
}

namespace {

std::string why_replaced(const Node& n) {
  std::string s = "node " + (n.name.empty() ? n.id : n.name) + " is " + std::string(to_string(n.provision_state));
  if (n.maintenance) s += " in maintenance";
  if (!n.last_error.empty()) s += ": " + n.last_error;
  return s;
}

}  // namespace

asio::awaitable<void> AllocationEngine::Impl::together(std::vector<std::function<asio::awaitable<void>()>> jobs) {
  if (jobs.size() == 1) {
    co_await jobs.front()();
    co_return;
  }
  WaitGroup running_jobs;
  for (auto& job : jobs) {
    asio::co_spawn(
        io,
        [self = shared_from_this(), job = std::move(job), ticket = running_jobs.add()]() -> asio::awaitable<void> {
          try {
            co_await job();
          } catch (const std::exception& e) {
            self->log.error("allocation member step crashed", {{"error", e.what()}});
          }
        },
        asio::detached);
  }
  // The jobs refer to the caller's frame: every one ends before it goes on.
  co_await running_jobs.wait();
}

asio::awaitable<bool> AllocationEngine::Impl::drive_members(Allocation a, const MemberNodes& members) {
  bool all_serving = true;
  bool done = true;
  int64_t serving = 0;
  std::vector<Node> to_deploy;
  for (const AllocationMember& m : a.members) {
    if (m.status != MemberStatus::kMember) continue;
    std::string node_id = m.node_id;
    Result<Node> n = members.get(node_id);
    if (!n) {
      Node gone;
      gone.id = node_id;
      gone.name = node_id;
      std::string why = "node " + node_id + " was deleted";
      bool replaced = co_await replace(a, gone, why);
      if (!replaced) co_return false;
      all_serving = false;
      continue;
    }
    if (n->allocation != a.id || n->tenant != a.tenant) {
      std::string why = "node " + (n->name.empty() ? n->id : n->name) + " was taken out of the allocation";
      Node taken = *n;
      bool replaced = co_await replace(a, taken, why);
      if (!replaced) co_return false;
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
      if (!replaced) co_return false;
      continue;
    }
    if (need == MemberNeed::kDeploy) to_deploy.push_back(*n);
  }

  // The members deploy at once: each verb is a few store calls of its own
  // (one after another they made a 5-node allocation wait five times as
  // long), and the conductor serialises what concerns one node.
  std::vector<Result<Node>> deployed(to_deploy.size(), Error(Code::kInternal, "not run"));
  std::vector<std::function<asio::awaitable<void>()>> jobs;
  for (std::size_t i = 0; i < to_deploy.size(); ++i)
    jobs.push_back([this, &a, &to_deploy, &deployed, i]() -> asio::awaitable<void> {
      ProvisionArgs args;
      args.image = a.image;
      args.allocation = a.id;
      Actor actor = engine_actor("");
      deployed[i] = co_await conductor.provision(to_deploy[i].id, ProvisionEvent::kDeploy, args, actor);
    });
  co_await together(std::move(jobs));
  std::string problem;
  for (std::size_t i = 0; i < to_deploy.size(); ++i) {
    if (deployed[i]) continue;
    const Node& n = to_deploy[i];
    // Bad input (the image went away or stopped being usable) will not get
    // better by retrying: the allocation fails. Anything else (busy) is
    // tried again.
    if (deployed[i].error().code == Code::kInvalidArgument) {
      std::string why = "deploy refused: " + deployed[i].error().message;
      Result<Allocation> f = co_await transition(a, AllocationEvent::kFail, why);
      co_return static_cast<bool>(f);
    }
    problem = "deploying " + (n.name.empty() ? n.id : n.name) + ": " + deployed[i].error().message;
  }
  if (!problem.empty()) {
    co_await note_error(a, problem);
    done = false;
  }
  if (all_serving && serving == a.count) {
    if (a.state == AllocationState::kProvisioning) {
      std::string no_reason;
      Result<Allocation> r = co_await transition(a, AllocationEvent::kReady, no_reason);
      if (!r) done = false;
    }
  } else if (a.state == AllocationState::kReady) {
    std::string why = "a member is being replaced";
    Result<Allocation> r = co_await transition(a, AllocationEvent::kDegrade, why);
    if (!r) done = false;
  }
  co_return done;
}

asio::awaitable<bool> AllocationEngine::Impl::replace(Allocation& a, Node n, std::string reason) {
  // Billing for this node stops now, whatever happens next.
  std::string aid = a.id;
  std::string nid = n.id;
  int64_t now = clock.now_ms();
  if (!co_await ledger("usage not closed", aid, [&] { return store.close_usage(aid, nid, now); })) co_return false;
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
    Result<std::optional<VirtualNodeMaker>> vms = guest_maker(catalogue, a);
    if (!vms) return vms.take_error();
    return store.leave_member(aid, nid, MemberStatus::kLeft, why, /*replace=*/true, events, *vms ? &**vms : nullptr);
  });
  if (r) {
    log.info("allocation member replaced", {{"allocation", a.id}, {"node", n.id}, {"reason", reason}});
    // The moves that follow in this reconcile check the version it wrote.
    a.version = r->version;
    a.replacements = r->replacements;
    co_return true;
  }
  // kPreconditionFailed: the member left (or began leaving) since `a` was
  // read; the next read judges what is there now. Anything but kConflict:
  // store trouble, tried again.
  if (r.error().code != Code::kConflict) co_return false;
  // Nothing can take its place: the allocation fails, and the failed member
  // leaves with the others as the failed allocation is given back.
  std::string failure = reason + "; no replacement: " + r.error().message;
  Result<Allocation> f = co_await transition(a, AllocationEvent::kFail, failure);
  (void)f;
  co_return false;
}

asio::awaitable<Outcome> AllocationEngine::Impl::give_back(Allocation a, const MemberNodes& members,
                                                            bool ledger_closed) {
  Outcome out;
  // Usage ended when giving back started: the release or the failure closed
  // it in its own transaction. An allocation left by a kilnd from before
  // that (its close a separate write a crash could lose) is closed here,
  // once per process (idempotent: only open rows close).
  std::string aid = a.id;
  if (!ledger_closed) {
    int64_t since = entered_at(a);
    if (co_await ledger("usage not closed", aid, [&] { return store.close_usage(aid, "", since); }))
      out.ledger_closed = true;
    else
      out.done = false;
  }
  // Each member is given back on its own, all at once.
  std::vector<const AllocationMember*> staying;
  for (const AllocationMember& m : a.members)
    if (m.status != MemberStatus::kLeft) staying.push_back(&m);
  std::vector<MemberGiven> given(staying.size());
  std::vector<std::function<asio::awaitable<void>()>> jobs;
  for (std::size_t i = 0; i < staying.size(); ++i)
    jobs.push_back([this, &a, &members, &staying, &given, i]() -> asio::awaitable<void> {
      given[i] = co_await give_back_member(a, *staying[i], members);
    });
  co_await together(std::move(jobs));
  co_await write_departures(aid, given);
  std::string problem;
  std::size_t left_now = 0;
  for (const MemberGiven& g : given) {
    if (!g.ok) out.done = false;
    if (!g.problem.empty()) problem = g.problem;
    if (g.left) ++left_now;
  }
  if (!problem.empty()) {
    co_await note_error(a, problem);
    out.done = false;
  }
  // Released once every member has left, those that left just now included
  // (rather than on the batch their departures' events start). Either way,
  // or when a failed allocation's last member left, it is out of flight.
  if (left_now == staying.size()) {
    if (a.state == AllocationState::kReleasing) {
      std::string no_reason;
      Result<Allocation> r = co_await transition(a, AllocationEvent::kReleased, no_reason);
      if (r) out.left_flight = true;
      else out.done = false;
    } else if (a.state == AllocationState::kFailed) {
      out.left_flight = true;
    }
  }
  co_return out;
}

asio::awaitable<MemberGiven> AllocationEngine::Impl::give_back_member(const Allocation& a, const AllocationMember& m,
                                                                      const MemberNodes& members) {
  MemberGiven out;
  const std::string node_id = m.node_id;
  Result<Node> n = members.get(node_id);
  if (!n) {
    std::string why = "node was deleted";
    out.leave = MemberLeave{node_id, MemberStatus::kLeft, why};
    co_return out;
  }
  if (!belongs_to(*n, a)) {
    std::string why = "no longer the allocation's";
    out.leave = MemberLeave{node_id, MemberStatus::kLeft, why};
    co_return out;
  }
  ProvisionState s = n->provision_state;
  bool cleaning = s == ProvisionState::kCleaning || s == ProvisionState::kBurningIn;
  if (m.status == MemberStatus::kLeaving) {
    // Undeployed: it leaves once cleaning is over, whichever way it ended.
    if (cleaning) co_return out;
    std::string how = s == ProvisionState::kAvailable ? std::string("released, cleaned")
                                                      : "released; node is " + std::string(to_string(s)) +
                                                            (n->last_error.empty() ? "" : ": " + n->last_error);
    out.leave = MemberLeave{node_id, MemberStatus::kLeft, how};
    co_return out;
  }
  if (s == ProvisionState::kAvailable && n->reservation.empty()) {
    // Claimed but never deployed: nothing of the tenant's is on it.
    std::string why = "released before deploy";
    out.leave = MemberLeave{node_id, MemberStatus::kLeft, why};
    co_return out;
  }
  Actor actor = engine_actor("");
  ProvisionArgs none;
  // A conflict means the node moved on since it was read (a deploy that
  // reached active as the abort came): its move is an event, and the engine
  // acts on the state it is in then. Anything else is the allocation's
  // last_error.
  if (s == ProvisionState::kDeploying || s == ProvisionState::kValidating) {
    Result<Node> ab = co_await conductor.provision(n->id, ProvisionEvent::kAbort, none, actor);
    if (!ab && ab.error().code != Code::kConflict) {
      out.ok = false;
      out.problem = "aborting " + n->id + ": " + ab.error().message;
    }
    co_return out;  // deploy_failed next, then undeployed
  }
  if (s == ProvisionState::kActive || s == ProvisionState::kDeployFailed) {
    Result<Node> u = co_await conductor.provision(n->id, ProvisionEvent::kUndeploy, none, actor);
    if (!u) {
      if (u.error().code != Code::kConflict) {
        out.ok = false;
        out.problem = "undeploying " + n->id + ": " + u.error().message;
      }
      co_return out;
    }
    std::string why = "undeploying";
    out.leave = MemberLeave{node_id, MemberStatus::kLeaving, why};
    co_return out;
  }
  if (cleaning) {
    std::string why = "cleaning";
    out.leave = MemberLeave{node_id, MemberStatus::kLeaving, why};
    co_return out;
  }
  // Quarantined, a failed state, manageable...: out of the pool already; an
  // operator decides what it needs. Available with a reservation: an
  // on-demand validation or power action; wait for it (its end is an event,
  // and the sweep looks again while the allocation is moving).
  if (s == ProvisionState::kAvailable) co_return out;
  std::string why = "released; node is " + std::string(to_string(s));
  out.leave = MemberLeave{node_id, MemberStatus::kLeft, why};
  co_return out;
}

asio::awaitable<void> AllocationEngine::Impl::write_departures(std::string aid, std::vector<MemberGiven>& given) {
  std::vector<MemberLeave> leaves;
  std::vector<MemberGiven*> of;
  for (MemberGiven& g : given) {
    if (!g.leave) continue;
    leaves.push_back(*g.leave);
    of.push_back(&g);
  }
  if (leaves.empty()) co_return;
  Result<MembersLeft> r = co_await db.run([&] { return store.leave_members(aid, leaves); });
  if (!r) log.warn("members not released", {{"allocation", aid}, {"error", r.error().message}});
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const bool moved = r && r->moved[k];
    if (moved) {
      if (leaves[k].status == MemberStatus::kLeft) of[k]->left = true;
      continue;
    }
    // Not written: the store failed, or the member moved since it was read
    // (the next read judges what is there now). Tried again either way.
    of[k]->ok = false;
    if (r) log.warn("member not released", {{"allocation", aid}, {"node", leaves[k].node_id},
                                            {"error", "its membership moved since it was read"}});
  }
}

}  // namespace kiln
