// AllocationStore conformance: allocations, members, all-or-nothing claims
// with quota and eligibility, virtual claims booking host capacity, detaching,
// the usage ledger, and the races several kilnd sharing one database run
// (claims through two store handles), on SQLite and PostgreSQL (backends.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "backends.h"
#include "common/ids.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// An available node of `profile` and `kind`, as the pool holds them.
Node pool_node(const std::string& name, const std::string& profile = "gpu", NodeKind kind = NodeKind::kBaremetal) {
  Node n = make_node(name);
  n.provision_state = ProvisionState::kAvailable;
  n.profile = profile;
  n.kind = kind;
  return n;
}

template <typename B>
std::string add_node(B& b, const Node& n) {
  Result<Node> made = b.nodes().create_node(n, event("node.created"));
  REQUIRE(made);
  b.clock.advance_ms(1);  // the pool drains oldest first: give each its own created_at
  return made->id;
}

// `count` pool nodes n0, n1, ... in the order the pool hands them out.
template <typename B>
std::vector<std::string> add_pool_nodes(B& b, int count) {
  std::vector<std::string> ids;
  for (int i = 0; i < count; ++i) ids.push_back(add_node(b, pool_node("n" + std::to_string(i))));
  return ids;
}

template <typename B>
void add_tenant(B& b, const std::string& name, std::vector<TenantQuota> quotas) {
  REQUIRE(b.tenants().create_tenant(Tenant{name, "", std::move(quotas), 0, 0, 0}));
}

Allocation request(const std::string& tenant, const std::string& name, int64_t count,
                   const std::string& profile = "gpu", NodeKind kind = NodeKind::kBaremetal) {
  Allocation a;
  a.id = new_uuid();
  a.name = name;
  a.tenant = tenant;
  a.profile = profile;
  a.kind = kind;
  a.count = count;
  a.image = "img";
  a.ssh_keys = {"ssh-ed25519 AAAA test"};
  a.state = AllocationState::kPending;
  return a;
}

std::set<std::string> member_ids(const Allocation& a) {
  std::set<std::string> out;
  for (const AllocationMember& m : a.members) out.insert(m.node_id);
  return out;
}

template <typename B>
int64_t last_seq(B& b) {
  Result<int64_t> s = b.events().last_event_seq();
  REQUIRE(s);
  return *s;
}

template <typename B>
std::vector<EventRecord> events_since(B& b, int64_t since) {
  auto r = b.events().list_events(since, 1000, std::nullopt, std::nullopt);
  REQUIRE(r);
  return *r;
}

// A VirtualNodeMaker for the cases: libvirt guests of profile "vm"; each host
// has room for `slots[host name]` guests, one "vcpus" row per guest. A pure
// function of the host and its rows, as the real planner (controller/hosts/
// placement.h) is.
VirtualNodeMaker slot_maker(std::map<std::string, int> slots) {
  VirtualNodeMaker m;
  m.make = [](const Allocation& a) {
    Node n;
    n.profile = a.profile;
    n.kind = NodeKind::kVirtual;
    n.provision_state = ProvisionState::kAvailable;
    n.bmc.driver = "libvirt";
    n.bmc.address = "libvirt://guest";
    return n;
  };
  m.plan = [slots](const Host& h, const std::vector<HostReservation>& booked,
                   const std::string& node_id) -> Result<PlacementPlan> {
    auto it = slots.find(h.name);
    const int room = it == slots.end() ? 0 : it->second;
    const int used = static_cast<int>(std::count_if(booked.begin(), booked.end(),
                                                    [](const HostReservation& r) { return r.kind == "vcpus"; }));
    if (used >= room)
      return Error(Code::kConflict, "host " + h.name + ": needs 1 slot, " + std::to_string(room - used) + " free");
    PlacementPlan p;
    p.placement.host_id = h.id;
    p.rows.push_back(HostReservation{h.id, node_id, "vcpus", node_id, 1});
    return p;
  };
  return m;
}

}  // namespace

TEMPLATE_TEST_CASE("conformance: allocations: create claims the oldest eligible nodes, get, list, update, count",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  add_tenant(b, "zeta", {{"gpu", NodeKind::kBaremetal, 10}});
  std::vector<std::string> ids = add_pool_nodes(b, 5);

  const int64_t before = last_seq(b);
  Allocation req = request("acme", "web", 2);
  req.traits = {};
  req.lease_seconds = 60;
  req.expires_at = b.clock.now_ms() + 60000;
  EventDraft created = event("allocation.created");
  created.tenant = "acme";
  auto a = s.create_allocation(req, {created}, nullptr);
  REQUIRE(a);
  CHECK(a->version == 1);
  CHECK(a->created_at == b.clock.now_ms());
  CHECK(a->state == AllocationState::kPending);
  REQUIRE(a->members.size() == 2);
  CHECK(a->members[0].node_id == ids[0]);  // oldest first, in claim order
  CHECK(a->members[1].node_id == ids[1]);
  CHECK(a->members[0].status == MemberStatus::kMember);
  CHECK(a->members[0].joined_at == b.clock.now_ms());
  for (int i = 0; i < 2; ++i) {
    auto n = b.nodes().get_node(ids[i]);
    REQUIRE(n);
    CHECK(n->tenant == "acme");
    CHECK(n->allocation == a->id);
    CHECK(n->version == 2);
  }
  // The caller's events, then node.claimed per node, in one commit.
  auto evs = events_since(b, before);
  REQUIRE(evs.size() == 3);
  CHECK(evs[0].type == "allocation.created");
  CHECK(evs[1].type == "node.claimed");
  CHECK(evs[1].node_id == ids[0]);
  CHECK(evs[1].tenant == "acme");
  CHECK(evs[1].detail.value("allocation", "") == a->id);
  CHECK(evs[1].detail.value("allocation_name", "") == "web");
  CHECK(evs[2].node_id == ids[1]);

  // By id, by name within a tenant, by name across tenants.
  auto by_id = s.get_allocation(a->id, "");
  REQUIRE(by_id);
  CHECK(by_id->name == "web");
  CHECK(by_id->ssh_keys == req.ssh_keys);
  CHECK(by_id->expires_at == req.expires_at);
  CHECK(by_id->members.size() == 2);
  CHECK(s.get_allocation("web", "acme")->id == a->id);
  CHECK(s.get_allocation("web", "")->id == a->id);
  CHECK(s.get_allocation("web", "zeta").error().code == Code::kNotFound);
  CHECK(s.get_allocation("nope", "").error().code == Code::kNotFound);

  // The same name for another live allocation of the tenant: /name, nothing written.
  auto dup = s.create_allocation(request("acme", "web", 1), {}, nullptr);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == Code::kConflict);
  REQUIRE(dup.error().fields.size() == 1);
  CHECK(dup.error().fields[0].field == "/name");
  CHECK(b.nodes().get_node(ids[2])->tenant.empty());
  // Another tenant may use it.
  b.clock.advance_ms(1);
  auto z = s.create_allocation(request("zeta", "web", 1), {}, nullptr);
  REQUIRE(z);
  CHECK(member_ids(*z) == std::set<std::string>{ids[2]});

  // update_allocation_if: version check, mutate, what may not change is kept.
  b.clock.advance_ms(1);
  auto stale = s.update_allocation_if(a->id, 7, [](Allocation&) { return ok_status(); }, {});
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == Code::kPreconditionFailed);
  CHECK(stale.error().message == "allocation was modified (version 1, expected 7)");
  auto refused = s.update_allocation_if(
      a->id, std::nullopt, [](Allocation&) -> Status { return Error(Code::kConflict, "no"); }, {event("x")});
  CHECK(refused.error().code == Code::kConflict);
  const int64_t before_update = last_seq(b);
  auto up = s.update_allocation_if(
      a->id, 1,
      [](Allocation& x) {
        x.state = AllocationState::kReady;
        x.tenant = "someone-else";
        x.history.push_back({5, "pending", "ready", "all members ready"});
        return ok_status();
      },
      {event("allocation.ready")});
  REQUIRE(up);
  CHECK(up->version == 2);
  CHECK(up->tenant == "acme");
  CHECK(up->updated_at == b.clock.now_ms());
  CHECK(up->members.size() == 2);
  CHECK(last_seq(b) == before_update + 1);
  auto reread = s.get_allocation(a->id, "acme");
  REQUIRE(reread);
  CHECK(reread->state == AllocationState::kReady);
  REQUIRE(reread->history.size() == 1);
  CHECK(reread->history[0].reason == "all members ready");
  CHECK(reread->history[0].at == 5);
  CHECK(s.update_allocation_if("nope", std::nullopt, nullptr, {}).error().code == Code::kNotFound);

  // list: all, by tenant, by state, oldest first.
  auto all = s.list_allocations({});
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK(all->at(0).id == a->id);
  CHECK(all->at(1).id == z->id);
  CHECK(all->at(0).members.size() == 2);
  auto of_zeta = s.list_allocations(AllocationFilter{"zeta", std::nullopt});
  REQUIRE(of_zeta);
  REQUIRE(of_zeta->size() == 1);
  CHECK(of_zeta->at(0).id == z->id);
  auto ready = s.list_allocations(AllocationFilter{std::nullopt, AllocationState::kReady});
  REQUIRE(ready);
  REQUIRE(ready->size() == 1);
  CHECK(ready->at(0).id == a->id);
  CHECK(s.list_allocations(AllocationFilter{"zeta", AllocationState::kReady})->empty());

  auto counts = s.count_allocations_by_state();
  REQUIRE(counts);
  CHECK(*counts == std::map<std::string, int64_t>{{"pending", 1}, {"ready", 1}});

  // Released ones leave the in-flight list (and free the name); failed ones
  // stay while a member has not left.
  REQUIRE(s.update_allocation_if(z->id, std::nullopt, [](Allocation& x) {
    x.state = AllocationState::kReleased;
    return ok_status();
  }, {}));
  REQUIRE(s.update_allocation_if(a->id, std::nullopt, [](Allocation& x) {
    x.state = AllocationState::kFailed;
    return ok_status();
  }, {}));
  auto flying = s.allocations_in_flight();
  REQUIRE(flying);
  REQUIRE(flying->size() == 1);
  CHECK(flying->at(0).id == a->id);
  for (const std::string& n : {ids[0], ids[1]})
    REQUIRE(s.leave_member(a->id, n, MemberStatus::kLeft, "released", false, {}, nullptr));
  CHECK(s.allocations_in_flight()->empty());
  b.clock.advance_ms(1);
  auto again = s.create_allocation(request("zeta", "web", 1), {}, nullptr);
  REQUIRE(again);
  // By name: the live one first, else the newest.
  CHECK(s.get_allocation("web", "zeta")->id == again->id);
}

TEMPLATE_TEST_CASE("conformance: allocations: a claim is all or nothing and names /count",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  std::vector<std::string> ids = add_pool_nodes(b, 2);
  const int64_t before = last_seq(b);

  auto three = s.create_allocation(request("acme", "big", 3), {event("allocation.created")}, nullptr);
  REQUIRE_FALSE(three);
  CHECK(three.error().code == Code::kConflict);
  CHECK(three.error().message == "3 requested, 2 available");
  REQUIRE(three.error().fields.size() == 1);
  CHECK(three.error().fields[0].field == "/count");
  CHECK(three.error().fields[0].message == "3 requested, 2 available");
  // Nothing written: no allocation, no claim, no event.
  CHECK(s.list_allocations({})->empty());
  CHECK(s.get_allocation("big", "acme").error().code == Code::kNotFound);
  for (const std::string& id : ids) {
    auto n = b.nodes().get_node(id);
    CHECK(n->tenant.empty());
    CHECK(n->allocation.empty());
    CHECK(n->version == 1);
  }
  CHECK(last_seq(b) == before);
  CHECK(s.count_allocations_by_state()->empty());

  // Two do fit.
  auto two = s.create_allocation(request("acme", "big", 2), {}, nullptr);
  REQUIRE(two);
  CHECK(member_ids(*two) == std::set<std::string>(ids.begin(), ids.end()));
}

TEMPLATE_TEST_CASE("conformance: allocations: the quota counts the tenant's nodes and refuses with 403 on /count",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 3}});
  for (int i = 0; i < 6; ++i) add_node(b, pool_node("n" + std::to_string(i)));
  add_node(b, pool_node("cpu0", "cpu"));

  REQUIRE(s.create_allocation(request("acme", "a", 2), {}, nullptr));
  const int64_t before = last_seq(b);
  auto over = s.create_allocation(request("acme", "b", 2), {}, nullptr);
  REQUIRE_FALSE(over);
  CHECK(over.error().code == Code::kPermissionDenied);
  CHECK(over.error().message == "quota for gpu baremetal is 3, 2 in use");
  REQUIRE(over.error().fields.size() == 1);
  CHECK(over.error().fields[0].field == "/count");
  CHECK(over.error().fields[0].message == "quota for gpu baremetal is 3, 2 in use");
  CHECK(last_seq(b) == before);
  CHECK(s.list_allocations({})->size() == 1);
  // One more fits exactly.
  REQUIRE(s.create_allocation(request("acme", "c", 1), {}, nullptr));
  // No quota for the profile and kind: 0.
  auto none = s.create_allocation(request("acme", "d", 1, "cpu"), {}, nullptr);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == Code::kPermissionDenied);
  CHECK(none.error().message == "quota for cpu baremetal is 0, 0 in use");
  // A tenant that does not exist has none either.
  auto ghost = s.create_allocation(request("ghost", "e", 1), {}, nullptr);
  REQUIRE_FALSE(ghost);
  CHECK(ghost.error().code == Code::kPermissionDenied);
  CHECK(s.list_allocations({})->size() == 2);
}

TEMPLATE_TEST_CASE("conformance: allocations: only eligible nodes are claimed",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 20}, {"gpu", NodeKind::kVirtual, 20}});
  // One of each reason not to claim, oldest first, then the eligible ones.
  Node maint = pool_node("maint", "gpu");
  maint.maintenance = true;
  maint.maintenance_reason = "fan";
  add_node(b, maint);
  Node fault = pool_node("fault", "gpu");
  fault.fault = "power_failure";
  add_node(b, fault);
  Node reserved = pool_node("reserved", "gpu");
  reserved.reservation = "op-1";
  add_node(b, reserved);
  Node manageable = pool_node("manageable", "gpu");
  manageable.provision_state = ProvisionState::kManageable;
  add_node(b, manageable);
  add_node(b, pool_node("other-profile", "cpu"));
  add_node(b, pool_node("other-kind", "gpu", NodeKind::kVirtual));
  Node owned = pool_node("owned", "gpu");
  owned.tenant = "zeta";
  add_node(b, owned);
  Node plain = pool_node("plain", "gpu");
  const std::string plain_id = add_node(b, plain);
  Node nvlink = pool_node("nvlink", "gpu");
  nvlink.traits = {"ib", "nvlink"};
  const std::string nvlink_id = add_node(b, nvlink);

  Allocation want_traits = request("acme", "t", 1);
  want_traits.traits = {"nvlink"};
  auto t = s.create_allocation(want_traits, {}, nullptr);
  REQUIRE(t);
  CHECK(member_ids(*t) == std::set<std::string>{nvlink_id});
  Allocation two_traits = request("acme", "t2", 1);
  two_traits.traits = {"nvlink", "ib"};
  auto t2 = s.create_allocation(two_traits, {}, nullptr);
  REQUIRE_FALSE(t2);  // the one node with both is taken
  CHECK(t2.error().message == "1 requested, 0 available");

  auto two = s.create_allocation(request("acme", "two", 2), {}, nullptr);
  REQUIRE_FALSE(two);
  CHECK(two.error().message == "2 requested, 1 available");
  auto one = s.create_allocation(request("acme", "one", 1), {}, nullptr);
  REQUIRE(one);
  CHECK(member_ids(*one) == std::set<std::string>{plain_id});
  auto virt = s.create_allocation(request("acme", "v", 1, "gpu", NodeKind::kVirtual), {}, nullptr);
  REQUIRE(virt);  // the virtual one, claimed as it is (no maker: no booking)
  CHECK(b.nodes().get_node(virt->members.at(0).node_id)->name == "other-kind");
  // Nothing else moved.
  for (const char* name : {"maint", "fault", "reserved", "manageable", "other-profile"})
    CHECK(b.nodes().get_node(name)->allocation.empty());
  CHECK(b.nodes().get_node("owned")->tenant == "zeta");
}

TEMPLATE_TEST_CASE("conformance: allocations: members leave, are detached and replaced",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  std::vector<std::string> ids = add_pool_nodes(b, 4);
  auto a = s.create_allocation(request("acme", "web", 2), {}, nullptr);
  REQUIRE(a);
  b.clock.advance_ms(10);

  // Leaving: the row says so, the node stays the tenant's.
  auto leaving = s.leave_member(a->id, ids[1], MemberStatus::kLeaving, "undeploying", false, {}, nullptr);
  REQUIRE(leaving);
  CHECK(leaving->members.at(1).status == MemberStatus::kLeaving);
  CHECK(leaving->members.at(1).reason == "undeploying");
  CHECK(leaving->members.at(1).left_at == 0);
  CHECK(b.nodes().get_node(ids[1])->tenant == "acme");

  // Left, replaced: the node is detached (node.released with the reason) and
  // the next eligible node claimed; the replacement is counted. (The engine
  // cleans a node as it leaves, so it is not claimable again at once.)
  REQUIRE(b.nodes().update_node_if(ids[0], {}, [](Node& n) {
    n.provision_state = ProvisionState::kCleaning;
    return ok_status();
  }, {}));
  const int64_t before = last_seq(b);
  auto left = s.leave_member(a->id, ids[0], MemberStatus::kLeft, "failed health check", true,
                             {event("allocation.member_replaced")}, nullptr);
  REQUIRE(left);
  CHECK(left->replacements == 1);
  CHECK(left->version == a->version + 1);
  CHECK(left->updated_at == b.clock.now_ms());
  REQUIRE(left->members.size() == 3);
  CHECK(left->members[0].node_id == ids[0]);
  CHECK(left->members[0].status == MemberStatus::kLeft);
  CHECK(left->members[0].left_at == b.clock.now_ms());
  CHECK(left->members[2].node_id == ids[2]);
  CHECK(left->members[2].status == MemberStatus::kMember);
  auto gone = b.nodes().get_node(ids[0]);
  CHECK(gone->tenant.empty());
  CHECK(gone->allocation.empty());
  CHECK(gone->provision_state == ProvisionState::kCleaning);  // detaching moves no state
  CHECK(b.nodes().get_node(ids[2])->allocation == a->id);
  auto evs = events_since(b, before);
  REQUIRE(evs.size() == 3);
  CHECK(evs[0].type == "allocation.member_replaced");
  CHECK(evs[1].type == "node.released");
  CHECK(evs[1].node_id == ids[0]);
  CHECK(evs[1].tenant == "acme");
  CHECK(evs[1].detail.value("reason", "") == "failed health check");
  CHECK(evs[2].type == "node.claimed");
  CHECK(evs[2].node_id == ids[2]);
  auto reread = s.get_allocation(a->id, "");
  REQUIRE(reread);
  CHECK(reread->replacements == 1);
  CHECK(reread->members.size() == 3);

  // Left without a replacement.
  REQUIRE(b.nodes().update_node_if(ids[1], {}, [](Node& n) {
    n.provision_state = ProvisionState::kCleaning;
    return ok_status();
  }, {}));
  auto z = s.leave_member(a->id, ids[1], MemberStatus::kLeft, "x", false, {}, nullptr);
  REQUIRE(z);
  CHECK(z->replacements == 1);
  CHECK(b.nodes().get_node(ids[1])->allocation.empty());

  // Not a member.
  auto stranger = s.leave_member(a->id, ids[3], MemberStatus::kLeft, "x", false, {}, nullptr);
  REQUIRE_FALSE(stranger);
  CHECK(stranger.error().code == Code::kNotFound);
  CHECK(s.leave_member("nope", ids[3], MemberStatus::kLeft, "x", false, {}, nullptr).error().code ==
        Code::kNotFound);

  // Replacements: refused with nothing written when none is free or all are used.
  REQUIRE(b.nodes().update_node_if(ids[3], {}, [](Node& n) {
    n.maintenance = true;
    return ok_status();
  }, {}));
  const int64_t before_refusal = last_seq(b);
  auto none = s.leave_member(a->id, ids[2], MemberStatus::kLeft, "x", true, {event("y")}, nullptr);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == Code::kConflict);
  CHECK(none.error().message == "no eligible gpu baremetal node is free");
  CHECK(b.nodes().get_node(ids[2])->allocation == a->id);  // not detached either
  CHECK(s.get_allocation(a->id, "")->members.at(2).status == MemberStatus::kMember);
  CHECK(last_seq(b) == before_refusal);
  REQUIRE(b.nodes().update_node_if(ids[3], {}, [](Node& n) {
    n.maintenance = false;
    return ok_status();
  }, {}));
  REQUIRE(b.nodes().update_node_if(ids[2], {}, [](Node& n) {
    n.provision_state = ProvisionState::kCleaning;
    return ok_status();
  }, {}));
  auto second = s.leave_member(a->id, ids[2], MemberStatus::kLeft, "x", true, {}, nullptr);
  REQUIRE(second);
  CHECK(second->replacements == 2);
  CHECK(b.nodes().get_node(ids[3])->allocation == a->id);
  auto used = s.leave_member(a->id, ids[3], MemberStatus::kLeft, "x", true, {}, nullptr);
  REQUIRE_FALSE(used);
  CHECK(used.error().code == Code::kConflict);
  CHECK(used.error().message == "allocation web has used all 2 of its replacements");
  CHECK(b.nodes().get_node(ids[3])->allocation == a->id);
}

TEMPLATE_TEST_CASE("conformance: allocations: leave_members moves several members in one write, skipping those that moved",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  std::vector<std::string> ids = add_pool_nodes(b, 4);
  auto a = s.create_allocation(request("acme", "web", 4), {}, nullptr);
  REQUIRE(a);
  // n3 has left already (an earlier release's write).
  REQUIRE(s.leave_member(a->id, ids[3], MemberStatus::kLeft, "earlier", false, {}, nullptr));
  b.clock.advance_ms(10);
  const int64_t before = last_seq(b);

  auto r = s.leave_members(a->id, {{ids[0], MemberStatus::kLeaving, "undeploying"},
                                   {ids[1], MemberStatus::kLeft, "released, cleaned"},
                                   {ids[3], MemberStatus::kLeft, "again"},      // left: may not move
                                   {"not-a-member", MemberStatus::kLeft, "?"},  // nobody
                                   {ids[2], MemberStatus::kLeft, "released before deploy"}});
  REQUIRE(r);
  CHECK(r->moved == std::vector<bool>{true, true, false, false, true});
  std::map<std::string, AllocationMember> m;
  for (const AllocationMember& x : r->allocation.members) m[x.node_id] = x;
  CHECK(m.at(ids[0]).status == MemberStatus::kLeaving);
  CHECK(m.at(ids[0]).reason == "undeploying");
  CHECK(m.at(ids[1]).status == MemberStatus::kLeft);
  CHECK(m.at(ids[1]).left_at == b.clock.now_ms());
  CHECK(m.at(ids[3]).reason == "earlier");  // untouched
  CHECK(m.at(ids[2]).status == MemberStatus::kLeft);
  // The read back agrees; the members that left are detached, the leaving one is still the tenant's.
  auto reread = s.get_allocation(a->id, "");
  REQUIRE(reread);
  CHECK(member_ids(*reread) == member_ids(r->allocation));
  CHECK(b.nodes().get_node(ids[0])->tenant == "acme");
  for (int i : {1, 2}) {
    auto n = b.nodes().get_node(ids[i]);
    CHECK(n->tenant.empty());
    CHECK(n->allocation.empty());
  }
  // A node.released per member that left now, in the order given.
  auto evs = events_since(b, before);
  REQUIRE(evs.size() == 2);
  CHECK(evs[0].type == "node.released");
  CHECK(evs[0].node_id == ids[1]);
  CHECK(evs[0].detail.value("reason", "") == "released, cleaned");
  CHECK(evs[1].node_id == ids[2]);

  // Leaving, then left in a later write.
  auto later = s.leave_members(a->id, {{ids[0], MemberStatus::kLeft, "released, cleaned"}});
  REQUIRE(later);
  CHECK(later->moved == std::vector<bool>{true});
  CHECK(b.nodes().get_node(ids[0])->allocation.empty());

  auto missing = s.leave_members("no-such-allocation", {{ids[0], MemberStatus::kLeft, "x"}});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Code::kNotFound);
}

TEMPLATE_TEST_CASE("conformance: allocations: a member moves forward only, so an old read cannot make it leave or be replaced twice",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  // The allocation engine acts on a read a few milliseconds old. Were a
  // departure unconditional, a reconcile that judged an old read would
  // "replace" a member that has already left and been replaced, claiming
  // (and billing) one more node than asked for.
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  std::vector<std::string> ids = add_pool_nodes(b, 5);
  auto a = s.create_allocation(request("acme", "web", 3), {}, nullptr);
  REQUIRE(a);
  auto cleaning = [&](const std::string& id) {
    REQUIRE(b.nodes().update_node_if(id, {}, [](Node& n) {
      n.provision_state = ProvisionState::kCleaning;
      return ok_status();
    }, {}));
  };
  auto member = [&](const std::string& id) {
    Result<Allocation> now = s.get_allocation(a->id, "");
    REQUIRE(now);
    for (const AllocationMember& m : now->members)
      if (m.node_id == id) return m;
    FAIL("no member " << id);
    return AllocationMember{};
  };

  // n0 fails and is replaced by n3, once.
  cleaning(ids[0]);
  b.clock.advance_ms(10);
  auto first = s.leave_member(a->id, ids[0], MemberStatus::kLeft, "disk", true, {event("allocation.member_replaced")},
                              nullptr);
  REQUIRE(first);
  CHECK(first->replacements == 1);
  CHECK(b.nodes().get_node(ids[3])->allocation == a->id);
  const AllocationMember gone = member(ids[0]);

  // The same departure again, as from a read taken before the first: refused
  // with nothing written (no claim, no event, the row as it was), although
  // n4 is free to claim.
  const int64_t seq = last_seq(b);
  const int64_t version = s.get_allocation(a->id, "")->version;
  b.clock.advance_ms(10);
  for (bool replace : {true, false}) {
    auto again = s.leave_member(a->id, ids[0], MemberStatus::kLeft, "disk", replace, {event("x")}, nullptr);
    REQUIRE_FALSE(again);
    CHECK(again.error().code == Code::kPreconditionFailed);
    CHECK(again.error().message == "node " + ids[0] + " has already left allocation " + a->id);
  }
  CHECK(s.leave_member(a->id, ids[0], MemberStatus::kLeaving, "x", false, {}, nullptr).error().code ==
        Code::kPreconditionFailed);
  CHECK(last_seq(b) == seq);
  CHECK(s.get_allocation(a->id, "")->version == version);
  CHECK(s.get_allocation(a->id, "")->replacements == 1);
  CHECK(s.get_allocation(a->id, "")->members.size() == 4);
  CHECK(b.nodes().get_node(ids[4])->allocation.empty());
  CHECK(member(ids[0]).left_at == gone.left_at);

  // A leaving member is being given back: it leaves once, and is not
  // replaced.
  REQUIRE(s.leave_member(a->id, ids[1], MemberStatus::kLeaving, "undeploying", false, {}, nullptr));
  auto twice = s.leave_member(a->id, ids[1], MemberStatus::kLeaving, "undeploying", false, {}, nullptr);
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code == Code::kPreconditionFailed);
  CHECK(twice.error().message == "node " + ids[1] + " is already leaving allocation " + a->id);
  CHECK(s.leave_member(a->id, ids[1], MemberStatus::kLeft, "x", true, {}, nullptr).error().code ==
        Code::kPreconditionFailed);
  CHECK(b.nodes().get_node(ids[4])->allocation.empty());
  REQUIRE(s.leave_member(a->id, ids[1], MemberStatus::kLeft, "cleaned", false, {}, nullptr));
  CHECK(member(ids[1]).status == MemberStatus::kLeft);
  CHECK(s.leave_member(a->id, ids[1], MemberStatus::kLeft, "cleaned", false, {}, nullptr).error().code ==
        Code::kPreconditionFailed);
  // Not a member at all is still kNotFound.
  CHECK(s.leave_member(a->id, ids[4], MemberStatus::kLeft, "x", false, {}, nullptr).error().code == Code::kNotFound);
}

TEMPLATE_TEST_CASE("conformance: allocations: a replacement never claims a node that was already the allocation's member",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  // The engine undeploys a failed member and then replaces it. Where the
  // undeploy ends first, the node is back in the pool (available, detached)
  // and, being the oldest, the claim took it again: its member row already
  // exists, so the replacement failed on the key, every time it was tried.
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  std::vector<std::string> ids = add_pool_nodes(b, 3);
  auto a = s.create_allocation(request("acme", "web", 2), {}, nullptr);
  REQUIRE(a);
  // n0 was undeployed and cleaned back to the pool before it left.
  auto back_in_pool = [&](const std::string& id) {
    REQUIRE(b.nodes().update_node_if(id, {}, [](Node& n) {
      n.allocation.clear();
      n.tenant.clear();
      return ok_status();
    }, {}));
  };
  back_in_pool(ids[0]);
  auto replaced = s.leave_member(a->id, ids[0], MemberStatus::kLeft, "deploy failed", true, {}, nullptr);
  REQUIRE(replaced);
  CHECK(replaced->replacements == 1);
  CHECK(member_ids(*replaced) == std::set<std::string>{ids[0], ids[1], ids[2]});
  CHECK(b.nodes().get_node(ids[2])->allocation == a->id);
  CHECK(b.nodes().get_node(ids[0])->allocation.empty());

  // With only former members free, there is no replacement: kConflict, as
  // for an empty pool, not a failure on the key.
  back_in_pool(ids[1]);
  auto none = s.leave_member(a->id, ids[1], MemberStatus::kLeft, "deploy failed", true, {}, nullptr);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == Code::kConflict);
  CHECK(none.error().message == "no eligible gpu baremetal node is free");
}

TEMPLATE_TEST_CASE("conformance: allocations: the usage ledger opens a row once, closes it once, lists by window",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  auto row = [](const std::string& alloc, const std::string& node, const std::string& tenant, int64_t at) {
    UsageRecord u;
    u.allocation = alloc;
    u.node_id = node;
    u.tenant = tenant;
    u.profile = "gpu";
    u.kind = NodeKind::kBaremetal;
    u.started_at = at;
    u.price_micros_per_second = 7;
    return u;
  };
  REQUIRE(s.open_usage({row("a1", "n1", "acme", 1000), row("a1", "n2", "acme", 1000), row("a2", "n3", "zeta", 3000)}));
  // Opening again keeps the open row (and its start).
  REQUIRE(s.open_usage({row("a1", "n1", "acme", 2000)}));
  auto all = s.list_usage({});
  REQUIRE(all);
  REQUIRE(all->size() == 3);
  CHECK(all->at(0).node_id == "n1");
  CHECK(all->at(0).started_at == 1000);
  CHECK(all->at(0).price_micros_per_second == 7);
  CHECK_FALSE(all->at(0).ended_at);
  CHECK(all->at(2).node_id == "n3");
  CHECK(all->at(0).id < all->at(1).id);

  // Close one node, then the rest of the allocation; a second close changes nothing.
  REQUIRE(s.close_usage("a1", "n1", 5000));
  REQUIRE(s.close_usage("a1", "", 6000));
  REQUIRE(s.close_usage("a1", "", 9000));
  // An end before the start is clamped to the start.
  REQUIRE(s.close_usage("a2", "n3", 10));
  all = s.list_usage({});
  REQUIRE(all);
  REQUIRE(all->size() == 3);
  CHECK(all->at(0).ended_at == 5000);
  CHECK(all->at(1).ended_at == 6000);
  CHECK(all->at(2).ended_at == 3000);
  // A closed row may be opened anew.
  REQUIRE(s.open_usage({row("a1", "n1", "acme", 7000)}));
  auto a1 = s.list_usage(UsageFilter{std::nullopt, "a1", 0, 0});
  REQUIRE(a1);
  REQUIRE(a1->size() == 3);
  CHECK(a1->at(2).started_at == 7000);
  CHECK_FALSE(a1->at(2).ended_at);

  // Windows: rows overlapping [from, to).
  auto w = s.list_usage(UsageFilter{std::nullopt, std::nullopt, 5000, 7000});
  REQUIRE(w);
  REQUIRE(w->size() == 1);  // n2 (ended 6000); n1's first ended at 5000, its second starts at 7000
  CHECK(w->at(0).node_id == "n2");
  auto zeta = s.list_usage(UsageFilter{"zeta", std::nullopt, 0, 0});
  REQUIRE(zeta);
  REQUIRE(zeta->size() == 1);
  CHECK(zeta->at(0).tenant == "zeta");
  CHECK(s.list_usage(UsageFilter{"zeta", "a1", 0, 0})->empty());
  auto open_after = s.list_usage(UsageFilter{std::nullopt, std::nullopt, 8000, 0});
  REQUIRE(open_after);
  REQUIRE(open_after->size() == 1);
  CHECK(open_after->at(0).started_at == 7000);
}

TEMPLATE_TEST_CASE("conformance: allocations: in_flight_with_nodes reads the allocations named or holding a node, and their members' nodes",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 100}});
  std::vector<std::string> ids = add_pool_nodes(b, 7);
  auto x = s.create_allocation(request("acme", "x", 2), {}, nullptr);  // n0 n1
  REQUIRE(x);
  b.clock.advance_ms(1);
  auto y = s.create_allocation(request("acme", "y", 2), {}, nullptr);  // n2 n3
  REQUIRE(y);
  b.clock.advance_ms(1);
  auto z = s.create_allocation(request("acme", "z", 2), {}, nullptr);  // n4 n5
  REQUIRE(z);
  // y's n2 failed and left (replaced by n6); z is released, out of flight.
  REQUIRE(b.nodes().update_node_if(ids[2], {}, [](Node& n) {
    n.provision_state = ProvisionState::kDeployFailed;
    return ok_status();
  }, {}));
  REQUIRE(s.leave_member(y->id, ids[2], MemberStatus::kLeft, "failed", true, {}, nullptr));
  REQUIRE(s.update_allocation_if(z->id, std::nullopt, [](Allocation& a) {
    a.state = AllocationState::kReleased;
    return ok_status();
  }, {}));
  // n1 is deleted under x.
  REQUIRE(b.nodes().delete_node_if(ids[1], NodeCondition{}, event("node.deleted")));

  auto node_ids = [](const AllocationsWithNodes& r) {
    std::set<std::string> out;
    for (const Node& n : r.nodes) out.insert(n.id);
    return out;
  };
  auto allocation_ids = [](const AllocationsWithNodes& r) {
    std::vector<std::string> out;
    for (const Allocation& a : r.allocations) out.push_back(a.id);
    return out;
  };

  // Every one in flight, oldest first, with the nodes of members not left
  // (n1 deleted, n2 left).
  auto all = s.in_flight_with_nodes(std::nullopt);
  REQUIRE(all);
  CHECK(allocation_ids(*all) == std::vector<std::string>{x->id, y->id});
  CHECK(node_ids(*all) == std::set<std::string>{ids[0], ids[3], ids[6]});
  for (const Node& n : all->nodes) CHECK(n.version > 0);

  // By id: a released one is not in flight, an unknown one is nobody.
  auto named = s.in_flight_with_nodes(AllocationScope{{y->id, z->id, "nope"}, {}});
  REQUIRE(named);
  CHECK(allocation_ids(*named) == std::vector<std::string>{y->id});
  CHECK(node_ids(*named) == std::set<std::string>{ids[3], ids[6]});

  // By node: n3 is y's; n2 left y and n4 is the released z's: neither names
  // one; n0 is x's. Ids and nodes together, each allocation once.
  auto by_node = s.in_flight_with_nodes(AllocationScope{{}, {ids[3], ids[2], ids[4]}});
  REQUIRE(by_node);
  CHECK(allocation_ids(*by_node) == std::vector<std::string>{y->id});
  auto both = s.in_flight_with_nodes(AllocationScope{{y->id}, {ids[0], ids[3], ids[6]}});
  REQUIRE(both);
  CHECK(allocation_ids(*both) == std::vector<std::string>{x->id, y->id});
  auto none = s.in_flight_with_nodes(AllocationScope{{}, {}});
  REQUIRE(none);
  CHECK(none->allocations.empty());
  CHECK(none->nodes.empty());
}

TEMPLATE_TEST_CASE("conformance: allocations: get_allocation_with_nodes reads the allocation and its current members' nodes",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 100}});
  add_tenant(b, "other", {{"gpu", NodeKind::kBaremetal, 100}});
  std::vector<std::string> ids = add_pool_nodes(b, 4);
  auto x = s.create_allocation(request("acme", "x", 3), {}, nullptr);  // n0 n1 n2
  REQUIRE(x);
  // n1 left; n2 was deleted under it.
  REQUIRE(s.leave_member(x->id, ids[1], MemberStatus::kLeft, "gone", false, {}, nullptr));
  REQUIRE(b.nodes().delete_node_if(ids[2], NodeCondition{}, event("node.deleted")));

  auto alone = s.get_allocation(x->id, "");
  REQUIRE(alone);
  // By id (in any case), by name in the tenant's scope, and as tenant/name.
  for (auto [ref, scope] : std::vector<std::pair<std::string, std::string>>{
           {x->id, ""}, {upper(x->id), "acme"}, {"x", "acme"}, {"acme/x", ""}}) {
    INFO(ref << " in scope '" << scope << "'");
    auto both = s.get_allocation_with_nodes(ref, scope);
    REQUIRE(both);
    CHECK(both->allocation.id == x->id);
    CHECK(both->allocation.version == alone->version);
    CHECK(member_ids(both->allocation) == member_ids(*alone));
    REQUIRE(both->nodes.size() == 1);  // n0: n1 left, n2 is gone
    auto n0 = b.nodes().get_node(ids[0]);
    REQUIRE(n0);
    CHECK(both->nodes[0].id == ids[0]);
    CHECK(both->nodes[0].version == n0->version);
    CHECK(both->nodes[0].allocation == x->id);
  }
  // Errors as get_allocation's.
  for (auto [ref, scope] : std::vector<std::pair<std::string, std::string>>{
           {"x", "other"}, {"acme/x", "other"}, {"nope", ""}}) {
    INFO(ref << " in scope '" << scope << "'");
    auto both = s.get_allocation_with_nodes(ref, scope);
    REQUIRE_FALSE(both);
    CHECK(both.error().code == Code::kNotFound);
    CHECK(s.get_allocation(ref, scope).error().code == Code::kNotFound);
  }
}

TEMPLATE_TEST_CASE("conformance: allocations: member_nodes reads the current members' nodes of many allocations at once",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 100}});
  add_tenant(b, "other", {{"gpu", NodeKind::kBaremetal, 100}});
  std::vector<std::string> ids = add_pool_nodes(b, 7);
  auto x = s.create_allocation(request("acme", "x", 3), {}, nullptr);  // n0 n1 n2
  auto y = s.create_allocation(request("other", "y", 2), {}, nullptr);  // n3 n4
  auto z = s.create_allocation(request("acme", "z", 1), {}, nullptr);   // n5
  REQUIRE(x);
  REQUIRE(y);
  REQUIRE(z);
  // In x, n1 left and n2 was deleted under it.
  REQUIRE(s.leave_member(x->id, ids[1], MemberStatus::kLeft, "gone", false, {}, nullptr));
  REQUIRE(b.nodes().delete_node_if(ids[2], NodeCondition{}, event("node.deleted")));
  auto read = [&](std::initializer_list<std::string> refs) {
    std::vector<Allocation> all;
    for (const std::string& ref : refs) {
      auto a = s.get_allocation(ref, "");
      REQUIRE(a);
      all.push_back(*a);
    }
    auto nodes = s.member_nodes(all);
    REQUIRE(nodes);
    std::map<std::string, int64_t> versions;  // id -> version
    for (const Node& n : *nodes) {
      CHECK(versions.count(n.id) == 0);  // each node once
      versions[n.id] = n.version;
    }
    return versions;
  };
  auto version_of = [&](int i) {
    auto n = b.nodes().get_node(ids[i]);
    REQUIRE(n);
    return n->version;
  };
  // Across tenants (the caller decides what it may show), left and deleted
  // members absent, a node not in any of them (n6) absent.
  CHECK(read({x->id, y->id, z->id}) == std::map<std::string, int64_t>{{ids[0], version_of(0)},
                                                                      {ids[3], version_of(3)},
                                                                      {ids[4], version_of(4)},
                                                                      {ids[5], version_of(5)}});
  CHECK(read({y->id}) == std::map<std::string, int64_t>{{ids[3], version_of(3)}, {ids[4], version_of(4)}});
  CHECK(read({}).empty());
}

TEMPLATE_TEST_CASE("conformance: allocations: a move and the usage rows it opens or closes commit together or not at all",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  // The engine's move to ready opens the members' usage rows in the move's
  // own transaction: were they two, a kilnd killed between them would leave
  // a ready allocation nobody bills (nothing opens them again, since every
  // member serves). A ledger write that fails here fails the move.
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  for (int i = 0; i < 2; ++i) add_node(b, pool_node("n" + std::to_string(i)));
  auto a = s.create_allocation(request("acme", "web", 2), {}, nullptr);
  REQUIRE(a);
  REQUIRE(s.update_allocation_if(a->id, std::nullopt, [](Allocation& x) {
    x.state = AllocationState::kProvisioning;
    return ok_status();
  }, {}));
  auto ready = [&](int64_t at) {
    return s.update_allocation_with_usage(a->id, [at](Allocation& x, LedgerWrites& usage) -> Status {
      x.state = AllocationState::kReady;
      x.ready_at = at;
      for (const AllocationMember& m : x.members) {
        UsageRecord u;
        u.allocation = x.id;
        u.node_id = m.node_id;
        u.tenant = x.tenant;
        u.profile = x.profile;
        u.kind = x.kind;
        u.started_at = at;
        u.price_micros_per_second = 3;
        usage.open.push_back(u);
      }
      return ok_status();
    }, {event("allocation.transition")});
  };
  auto state = [&] { return s.get_allocation(a->id, "")->state; };
  auto rows = [&] {
    auto r = s.list_usage(UsageFilter{std::nullopt, a->id, 0, 0});
    REQUIRE(r);
    return *r;
  };

  // The rows cannot be written: the move does not happen, nor its event.
  const int64_t seq = last_seq(b);
  const int64_t version = s.get_allocation(a->id, "")->version;
  b.refuse_usage_writes();
  auto refused = ready(5000);
  CHECK_FALSE(refused);
  CHECK(state() == AllocationState::kProvisioning);
  CHECK(s.get_allocation(a->id, "")->version == version);
  CHECK(rows().empty());
  CHECK(events_since(b, seq).empty());

  // They can: both, from the ready time.
  b.allow_usage_writes();
  auto moved = ready(6000);
  REQUIRE(moved);
  CHECK(moved->state == AllocationState::kReady);
  CHECK(state() == AllocationState::kReady);
  auto opened = rows();
  REQUIRE(opened.size() == 2);
  for (const UsageRecord& u : opened) {
    CHECK(u.started_at == 6000);
    CHECK_FALSE(u.ended_at);
    CHECK(u.price_micros_per_second == 3);
  }
  CHECK(events_since(b, seq).size() == 1);

  // A release closes them in its transaction, or does not happen.
  auto release = [&](int64_t at) {
    return s.update_allocation_with_usage(a->id, [at](Allocation& x, LedgerWrites& usage) -> Status {
      x.state = AllocationState::kReleasing;
      usage.close_at = at;
      return ok_status();
    }, {});
  };
  b.refuse_usage_writes();
  CHECK_FALSE(release(9000));
  CHECK(state() == AllocationState::kReady);
  for (const UsageRecord& u : rows()) CHECK_FALSE(u.ended_at);
  b.allow_usage_writes();
  REQUIRE(release(9000));
  CHECK(state() == AllocationState::kReleasing);
  for (const UsageRecord& u : rows()) CHECK(u.ended_at == 9000);

  // A mutate that refuses writes nothing, ledger included.
  auto no = s.update_allocation_with_usage(a->id, [](Allocation&, LedgerWrites& usage) -> Status {
    usage.close_at = 1;
    return Error(Code::kConflict, "not now");
  }, {});
  REQUIRE_FALSE(no);
  CHECK(no.error().code == Code::kConflict);
  for (const UsageRecord& u : rows()) CHECK(u.ended_at == 9000);
}

TEMPLATE_TEST_CASE("conformance: allocations: a virtual claim books host capacity and makes guests, all or nothing",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"vm", NodeKind::kVirtual, 10}});
  const std::string hv_a = b.add_host("hv-a");
  const std::string hv_b = b.add_host("hv-b");
  VirtualNodeMaker vms = slot_maker({{"hv-a", 2}, {"hv-b", 1}});
  // One pooled guest without a booking, made earlier.
  Node pooled = pool_node("pooled", "vm", NodeKind::kVirtual);
  pooled.bmc.driver = "libvirt";
  const std::string pooled_id = add_node(b, pooled);

  // Four do not fit (three slots): refused naming /count and what the hosts
  // lack, and nothing written (no nodes made, no bookings).
  const int64_t before = last_seq(b);
  auto four = s.create_allocation(request("acme", "big", 4, "vm", NodeKind::kVirtual), {}, &vms);
  REQUIRE_FALSE(four);
  CHECK(four.error().code == Code::kConflict);
  CHECK(four.error().message ==
        "4 requested, 3 available (no host has room for this node: host hv-a: needs 1 slot, 0 free; host hv-b: "
        "needs 1 slot, 0 free)");
  CHECK(four.error().fields.at(0).field == "/count");
  CHECK(last_seq(b) == before);
  CHECK(b.guest_count() == 0);
  CHECK(b.host_rows(hv_a).empty());
  NodeFilter all_nodes;
  ListOptions lo;
  lo.limit = 100;
  CHECK(b.nodes().list_nodes(all_nodes, lo)->size() == 1);

  // Two: the pooled one booked on hv-a, one made and booked on hv-a.
  auto two = s.create_allocation(request("acme", "two", 2, "vm", NodeKind::kVirtual), {}, &vms);
  REQUIRE(two);
  REQUIRE(two->members.size() == 2);
  CHECK(two->members[0].node_id == pooled_id);
  const std::string made_id = two->members[1].node_id;
  auto made = b.nodes().get_node(made_id);
  REQUIRE(made);
  CHECK(made->kind == NodeKind::kVirtual);
  CHECK(made->bmc.driver == "libvirt");
  CHECK(made->name == "vm-" + made_id.substr(0, 8));
  CHECK(made->tenant == "acme");
  CHECK(made->allocation == two->id);
  CHECK(made->version == 2);
  CHECK(b.host_rows(hv_a).size() == 2);
  CHECK(b.host_rows(hv_b).empty());
  CHECK(b.guest_count() == 2);
  auto evs = events_since(b, before);
  std::vector<std::string> types;
  for (const EventRecord& e : evs) types.push_back(e.type);
  CHECK(types == std::vector<std::string>{"node.created", "node.claimed", "node.claimed"});
  CHECK(evs[0].node_id == made_id);
  CHECK(evs[0].detail.value("made_for", "") == two->id);

  // The last slot (hv-b), then none: a replacement names the shortage.
  auto one = s.create_allocation(request("acme", "one", 1, "vm", NodeKind::kVirtual), {}, &vms);
  REQUIRE(one);
  CHECK(b.host_rows(hv_b).size() == 1);
  auto none = s.leave_member(two->id, made_id, MemberStatus::kLeaving, "x", true, {}, &vms);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == Code::kConflict);
  CHECK(none.error().message ==
        "no eligible vm virtual node is free: 1 requested, 0 available (no host has room for this node: host hv-a: "
        "needs 1 slot, 0 free; host hv-b: needs 1 slot, 0 free)");
  CHECK(s.get_allocation(two->id, "")->members.at(1).status == MemberStatus::kMember);

  // A member that leaves without ever being deployed gives its booking back.
  auto left = s.leave_member(two->id, made_id, MemberStatus::kLeft, "released", false, {}, &vms);
  REQUIRE(left);
  CHECK(b.host_rows(hv_a).size() == 1);
  CHECK(b.guest_count() == 2);
  // Its slot is free for the next claim, which reuses the emptied node.
  auto reuse = s.create_allocation(request("acme", "reuse", 1, "vm", NodeKind::kVirtual), {}, &vms);
  REQUIRE(reuse);
  CHECK(member_ids(*reuse) == std::set<std::string>{made_id});
  CHECK(b.host_rows(hv_a).size() == 2);
}

TEMPLATE_TEST_CASE("conformance: allocations: a claim with traits takes the oldest nodes that have them",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 20}});
  // Older nodes without the trait ahead of the ones that have it: the claim
  // counts only the nodes that qualify, however many are passed over.
  std::vector<std::string> with_ib;
  for (int i = 0; i < 6; ++i) {
    Node n = pool_node("n" + std::to_string(i));
    if (i % 3 == 2) n.traits = {"nvlink", "ib"};
    const std::string id = add_node(b, n);
    if (i % 3 == 2) with_ib.push_back(id);
  }
  Allocation want = request("acme", "ib", 2);
  want.traits = {"ib"};
  auto got = s.create_allocation(want, {}, nullptr);
  REQUIRE(got);
  REQUIRE(got->members.size() == 2);
  CHECK(got->members[0].node_id == with_ib[0]);
  CHECK(got->members[1].node_id == with_ib[1]);
  // Without traits the oldest nodes are taken, whatever traits they have.
  auto plain = s.create_allocation(request("acme", "plain", 1), {}, nullptr);
  REQUIRE(plain);
  CHECK(b.nodes().get_node(plain->members.at(0).node_id)->name == "n0");
}

TEMPLATE_TEST_CASE("conformance: allocations: members read back in the order the claim took them",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"vm", NodeKind::kVirtual, 10}});
  b.add_host("hv-a");
  VirtualNodeMaker vms = slot_maker({{"hv-a", 6}});
  Node pooled = pool_node("pooled", "vm", NodeKind::kVirtual);
  pooled.bmc.driver = "libvirt";
  const std::string pooled_id = add_node(b, pooled);

  // One pooled node, then four guests made in one claim: they share
  // joined_at (and created_at), and read back in the order they were made
  // (their node.created events), not by id.
  const int64_t before = last_seq(b);
  auto five = s.create_allocation(request("acme", "five", 5, "vm", NodeKind::kVirtual), {}, &vms);
  REQUIRE(five);
  std::vector<std::string> taken = {pooled_id};
  for (const EventRecord& e : events_since(b, before))
    if (e.type == "node.created") taken.push_back(e.node_id);
  REQUIRE(taken.size() == 5);
  auto order = [](const Allocation& a) {
    std::vector<std::string> ids;
    for (const AllocationMember& m : a.members) ids.push_back(m.node_id);
    return ids;
  };
  CHECK(order(*five) == taken);
  CHECK(order(*s.get_allocation(five->id, "")) == taken);

  // A replacement joins last, in every read.
  b.clock.advance_ms(1);
  auto replaced = s.leave_member(five->id, taken[2], MemberStatus::kLeaving, "disk", true, {}, &vms);
  REQUIRE(replaced);
  REQUIRE(replaced->members.size() == 6);
  std::vector<std::string> after = order(*replaced);
  CHECK(std::vector<std::string>(after.begin(), after.begin() + 5) == taken);
  CHECK(std::find(taken.begin(), taken.end(), after[5]) == taken.end());
  AllocationFilter mine;
  mine.tenant = "acme";
  auto listed = s.list_allocations(mine);
  REQUIRE(listed);
  REQUIRE(listed->size() == 1);
  CHECK(order(listed->front()) == after);
  auto in_flight = s.allocations_in_flight();
  REQUIRE(in_flight);
  REQUIRE(in_flight->size() == 1);
  CHECK(order(in_flight->front()) == after);
}

TEMPLATE_TEST_CASE("conformance: allocations: lists read each allocation's own members, past one query's batch",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  // Members are read for many allocations per query (500 at a time): each
  // must still get its own, in join order, on either side of the batch edge.
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 1000}});
  constexpr int kAllocations = 503;
  for (int i = 0; i < kAllocations + 1; ++i) add_node(b, pool_node("n" + std::to_string(i)));
  std::map<std::string, std::vector<std::string>> made;  // allocation id -> member node ids
  for (int i = 0; i < kAllocations; ++i) {
    auto a = s.create_allocation(request("acme", "a" + std::to_string(i), i == 0 ? 2 : 1), {}, nullptr);
    REQUIRE(a);
    for (const AllocationMember& m : a->members) made[a->id].push_back(m.node_id);
  }
  auto check = [&](const std::vector<Allocation>& got) {
    REQUIRE(got.size() == static_cast<std::size_t>(kAllocations));
    int mismatched = 0;
    for (const Allocation& a : got) {
      std::vector<std::string> ids;
      for (const AllocationMember& m : a.members) ids.push_back(m.node_id);
      if (ids != made.at(a.id)) ++mismatched;
    }
    CHECK(mismatched == 0);
  };
  AllocationFilter mine;
  mine.tenant = "acme";
  auto listed = s.list_allocations(mine);
  REQUIRE(listed);
  check(*listed);
  auto in_flight = s.allocations_in_flight();
  REQUIRE(in_flight);
  check(*in_flight);
}

// --- races: two kilnd on one database --------------------------------------

TEMPLATE_TEST_CASE("conformance: allocations: two claims racing for the last nodes, exactly one wins",
                   "[store][conformance][allocations][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  AllocationStore* handles[2] = {&b.allocations(), second.get()};
  // Two tenants, so that only the nodes are contended (not one quota).
  const std::string tenants[2] = {"acme", "zeta"};
  for (const std::string& t : tenants) add_tenant(b, t, {{"gpu", NodeKind::kBaremetal, 1000}});
  constexpr int kRounds = 10, kNodes = 3;
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    std::vector<std::string> ids;
    for (int i = 0; i < kNodes; ++i) ids.push_back(add_node(b, pool_node("r" + std::to_string(round) + "-" + std::to_string(i))));
    std::atomic<int> ready{0};
    Result<Allocation> got[2] = {Error(Code::kInternal, "not run"), Error(Code::kInternal, "not run")};
    std::vector<std::thread> racers;
    for (int r = 0; r < 2; ++r)
      racers.emplace_back([&, r] {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        got[r] = handles[r]->create_allocation(
            request(tenants[r], "race-" + std::to_string(round) + "-" + std::to_string(r), 2), {}, nullptr);
      });
    for (auto& t : racers) t.join();
    const int wins = (got[0] ? 1 : 0) + (got[1] ? 1 : 0);
    REQUIRE(wins == 1);
    const Result<Allocation>& loser = got[0] ? got[1] : got[0];
    CHECK(loser.error().code == Code::kConflict);
    CHECK(loser.error().message == "2 requested, 1 available");
    const Allocation& winner = got[0] ? *got[0] : *got[1];
    // Every node is held by at most one allocation, and the winner holds its two.
    int held = 0;
    for (const std::string& id : ids) {
      auto n = b.nodes().get_node(id);
      REQUIRE(n);
      if (!n->allocation.empty()) {
        CHECK(n->allocation == winner.id);
        ++held;
      }
    }
    CHECK(held == 2);
    // Claim the leftover so the next round starts from an empty pool.
    REQUIRE(b.allocations().create_allocation(request("acme", "rest-" + std::to_string(round), 1), {}, nullptr));
  }
  auto all = b.allocations().list_allocations({});
  REQUIRE(all);
  CHECK(all->size() == 2 * kRounds);
}

TEMPLATE_TEST_CASE("conformance: allocations: claims racing against one quota never exceed it",
                   "[store][conformance][allocations][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  AllocationStore* handles[2] = {&b.allocations(), second.get()};
  constexpr int kQuota = 5, kRacers = 8;
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, kQuota}});
  for (int i = 0; i < 2 * kRacers; ++i) add_node(b, pool_node("n" + std::to_string(i)));
  std::atomic<int> ready{0}, wins{0}, other{0};
  std::mutex mu;
  std::vector<std::string> other_errors;
  std::vector<std::thread> racers;
  for (int r = 0; r < kRacers; ++r)
    racers.emplace_back([&, r] {
      ready.fetch_add(1);
      while (ready.load() < kRacers) {
      }
      auto got = handles[r % 2]->create_allocation(request("acme", "q" + std::to_string(r), 2), {}, nullptr);
      if (got) {
        ++wins;
      } else if (got.error().code != Code::kPermissionDenied) {
        std::lock_guard<std::mutex> l(mu);
        other_errors.push_back(got.error().message);
        ++other;
      }
    });
  for (auto& t : racers) t.join();
  CHECK(other_errors.empty());
  CHECK(wins == kQuota / 2);  // two of 2 fit under 5; a third would make 6
  auto usage = b.tenants().tenant_usage("acme");
  REQUIRE(usage);
  CHECK(usage->at({"gpu", NodeKind::kBaremetal}) == 2 * wins.load());
  CHECK(usage->at({"gpu", NodeKind::kBaremetal}) <= kQuota);
}

TEMPLATE_TEST_CASE("conformance: allocations: a claim racing delete_tenant, never a claim for a deleted tenant",
                   "[store][conformance][allocations][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  constexpr int kRounds = 15;
  int claimed = 0, deleted = 0;
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    const std::string tenant = "t" + std::to_string(round);
    add_tenant(b, tenant, {{"gpu", NodeKind::kBaremetal, 5}});
    add_node(b, pool_node("n" + std::to_string(round)));
    std::atomic<int> ready{0};
    Result<Allocation> claim = Error(Code::kInternal, "not run");
    Status del = ok_status();
    std::thread claimer([&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      claim = b.allocations().create_allocation(request(tenant, "a", 1), {}, nullptr);
    });
    std::thread deleter([&] {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      del = second->delete_tenant(tenant);
    });
    claimer.join();
    deleter.join();
    // Exactly one of them wins: the claim (and the deletion is refused
    // because of it) or the deletion (and the claim finds no quota).
    REQUIRE(static_cast<bool>(claim) != static_cast<bool>(del));
    if (claim) {
      ++claimed;
      CHECK(del.error().code == Code::kConflict);
      CHECK(b.tenants().get_tenant(tenant));
    } else {
      ++deleted;
      CHECK(claim.error().code == Code::kPermissionDenied);
      CHECK(b.tenants().get_tenant(tenant).error().code == Code::kNotFound);
      auto usage = b.tenants().tenant_usage(tenant);
      REQUIRE(usage);
      CHECK(usage->empty());
      auto n = b.nodes().get_node("n" + std::to_string(round));
      CHECK(n->tenant.empty());
      // Take the node out of the pool for the next round.
      REQUIRE(b.nodes().update_node_if(n->id, {}, [](Node& x) {
        x.maintenance = true;
        return ok_status();
      }, {}));
    }
  }
  INFO("claims won " << claimed << ", deletions won " << deleted);
  CHECK(claimed + deleted == kRounds);
}

TEMPLATE_TEST_CASE("conformance: allocations: virtual claims racing for the last host slot never overbook it",
                   "[store][conformance][allocations][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  AllocationStore* handles[2] = {&b.allocations(), second.get()};
  // Two tenants, so that only the host is contended (not one quota).
  const std::string tenants[2] = {"acme", "zeta"};
  for (const std::string& t : tenants) add_tenant(b, t, {{"vm", NodeKind::kVirtual, 1000}});
  constexpr int kRounds = 10;
  std::map<std::string, int> slots;
  for (int round = 0; round < kRounds; ++round) slots["hv-" + std::to_string(round)] = 1;
  const VirtualNodeMaker vms = slot_maker(slots);
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    // One more host with one free slot; every earlier one is full.
    const std::string host = b.add_host("hv-" + std::to_string(round));
    std::atomic<int> ready{0};
    Result<Allocation> got[2] = {Error(Code::kInternal, "not run"), Error(Code::kInternal, "not run")};
    std::vector<std::thread> racers;
    for (int r = 0; r < 2; ++r)
      racers.emplace_back([&, r] {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        got[r] = handles[r]->create_allocation(
            request(tenants[r], "v-" + std::to_string(round) + "-" + std::to_string(r), 1, "vm", NodeKind::kVirtual), {},
            &vms);
      });
    for (auto& t : racers) t.join();
    REQUIRE((got[0] ? 1 : 0) + (got[1] ? 1 : 0) == 1);
    const Result<Allocation>& loser = got[0] ? got[1] : got[0];
    CHECK(loser.error().code == Code::kConflict);
    CHECK(loser.error().fields.at(0).field == "/count");
    CHECK(b.host_rows(host).size() == 1);
  }
  CHECK(b.guest_count() == kRounds);
}

TEMPLATE_TEST_CASE("conformance: allocations: 8 concurrent claims on two handles never share a node",
                   "[store][conformance][allocations][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  AllocationStore* handles[2] = {&b.allocations(), second.get()};
  constexpr int kNodes = 10, kRacers = 8;
  for (int r = 0; r < kRacers; ++r) add_tenant(b, "t" + std::to_string(r), {{"gpu", NodeKind::kBaremetal, 10}});
  for (int i = 0; i < kNodes; ++i) add_node(b, pool_node("n" + std::to_string(i)));
  const int64_t before = last_seq(b);
  std::atomic<int> ready{0};
  std::vector<Result<Allocation>> got(kRacers, Result<Allocation>(Error(Code::kInternal, "not run")));
  std::vector<std::thread> racers;
  for (int r = 0; r < kRacers; ++r)
    racers.emplace_back([&, r] {
      ready.fetch_add(1);
      while (ready.load() < kRacers) {
      }
      got[r] = handles[r % 2]->create_allocation(request("t" + std::to_string(r), "a", 2), {}, nullptr);
    });
  for (auto& t : racers) t.join();
  std::set<std::string> held;
  int wins = 0;
  for (int r = 0; r < kRacers; ++r) {
    INFO("racer " << r);
    if (!got[r]) {
      CHECK(got[r].error().code == Code::kConflict);
      CHECK(got[r].error().fields.at(0).field == "/count");
      continue;
    }
    ++wins;
    REQUIRE(got[r]->members.size() == 2);
    for (const AllocationMember& m : got[r]->members) {
      CHECK(held.insert(m.node_id).second);  // no node in two allocations
      CHECK(b.nodes().get_node(m.node_id)->allocation == got[r]->id);
    }
  }
  CHECK(wins == kNodes / 2);
  // Refused claims wrote nothing: one node.claimed per held node.
  CHECK(events_since(b, before).size() == held.size());
  CHECK(b.allocations().list_allocations({})->size() == static_cast<size_t>(wins));
}

TEMPLATE_TEST_CASE("conformance: allocations: leaving detaches only a node that still names the allocation",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  std::vector<std::string> ids = add_pool_nodes(b, 3);
  auto a = s.create_allocation(request("acme", "web", 3), {}, nullptr);
  REQUIRE(a);
  // n0: handed to another tenant meanwhile; n1: its allocation cleared by an
  // undeploy (still the tenant's); n2: as claimed.
  REQUIRE(b.nodes().update_node_if(ids[0], {}, [](Node& n) {
    n.tenant = "zeta";
    n.allocation = "other";
    return ok_status();
  }, {}));
  REQUIRE(b.nodes().update_node_if(ids[1], {}, [](Node& n) {
    n.allocation.clear();
    return ok_status();
  }, {}));
  const int64_t before = last_seq(b);
  for (const std::string& id : ids) REQUIRE(s.leave_member(a->id, id, MemberStatus::kLeft, "done", false, {}, nullptr));
  auto n0 = b.nodes().get_node(ids[0]);
  CHECK(n0->tenant == "zeta");
  CHECK(n0->allocation == "other");
  CHECK(n0->version == 3);  // created, claimed, handed over; the leave wrote nothing
  CHECK(b.nodes().get_node(ids[1])->tenant.empty());
  CHECK(b.nodes().get_node(ids[2])->tenant.empty());
  CHECK(b.nodes().get_node(ids[2])->allocation.empty());
  auto evs = events_since(b, before);
  REQUIRE(evs.size() == 2);  // node.released for n1 and n2 only
  CHECK(evs[0].node_id == ids[1]);
  CHECK(evs[1].node_id == ids[2]);
  auto after = s.get_allocation(a->id, "");
  REQUIRE(after);
  for (const AllocationMember& m : after->members) CHECK(m.status == MemberStatus::kLeft);
}

TEMPLATE_TEST_CASE("conformance: allocations: count_free_nodes counts the claimable nodes, libvirt guests left out",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  add_node(b, pool_node("a", "gpu"));
  add_node(b, pool_node("b", "gpu"));
  Node maint = pool_node("maint", "gpu");
  maint.maintenance = true;
  add_node(b, maint);
  Node owned = pool_node("owned", "gpu");
  owned.tenant = "acme";
  add_node(b, owned);
  add_node(b, pool_node("v", "vm", NodeKind::kVirtual));  // a virtual node of another driver counts
  Node guest = pool_node("guest", "vm", NodeKind::kVirtual);
  guest.bmc.driver = "libvirt";
  add_node(b, guest);
  auto free = b.nodes().count_free_nodes();
  REQUIRE(free);
  CHECK(*free == std::map<std::pair<std::string, NodeKind>, int64_t>{{{"gpu", NodeKind::kBaremetal}, 2},
                                                                     {{"vm", NodeKind::kVirtual}, 1}});
}

// Names are unique among a tenant's allocations that are not released (the
// partial unique index allocations_live_name); a lookup across tenants never
// guesses between two tenants' allocations of one name.
TEMPLATE_TEST_CASE("conformance: allocations: a name several tenants use is a conflict across tenants, and tenant/name resolves",
                   "[store][conformance][allocations]", KILN_STORE_BACKENDS) {
  TestType b;
  AllocationStore& s = b.allocations();
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 10}});
  add_tenant(b, "zeta", {{"gpu", NodeKind::kBaremetal, 10}});
  for (int i = 0; i < 4; ++i) add_node(b, pool_node("n" + std::to_string(i)));
  auto acme = s.create_allocation(request("acme", "web", 1), {}, nullptr);
  REQUIRE(acme);
  b.clock.advance_ms(1);
  // The newer one: the old rule ("the live one first, else the newest")
  // answered it for a bare name.
  auto zeta = s.create_allocation(request("zeta", "web", 1), {}, nullptr);
  REQUIRE(zeta);

  auto ambiguous = s.get_allocation("web", "");
  REQUIRE_FALSE(ambiguous);
  CHECK(ambiguous.error().code == Code::kConflict);
  CHECK(ambiguous.error().message ==
        "allocation name web is used by 2 tenants (acme, zeta): ask for it by id or as <tenant>/web");
  // By id, and as tenant/name, across tenants.
  CHECK(s.get_allocation(acme->id, "")->id == acme->id);
  CHECK(s.get_allocation("acme/web", "")->id == acme->id);
  CHECK(s.get_allocation("zeta/web", "")->id == zeta->id);
  // Within a tenant's scope the bare name is its own, and tenant/name only its own.
  CHECK(s.get_allocation("web", "acme")->id == acme->id);
  CHECK(s.get_allocation("acme/web", "acme")->id == acme->id);
  CHECK(s.get_allocation("zeta/web", "acme").error().code == Code::kNotFound);
  // Malformed or unknown references are not found, never a guess.
  for (const char* ref : {"nobody/web", "acme/", "/web", "acme/web/x", "acme/nope", "ACME/web", "acme//web"}) {
    INFO(ref);
    CHECK(s.get_allocation(ref, "").error().code == Code::kNotFound);
  }
  // "tenant/id" is not a name: ids are looked up bare.
  CHECK(s.get_allocation("acme/" + acme->id, "").error().code == Code::kNotFound);

  // A released allocation keeps its tenant's claim on the name's history:
  // released or not, two tenants' allocations of one name stay ambiguous.
  REQUIRE(s.update_allocation_if(zeta->id, std::nullopt, [](Allocation& x) {
    x.state = AllocationState::kReleased;
    return ok_status();
  }, {}));
  CHECK(s.get_allocation("web", "").error().code == Code::kConflict);
  CHECK(s.get_allocation("zeta/web", "")->id == zeta->id);
  // A released name may be used again by its tenant; tenant/name then means
  // the live one, and when all are released, the newest.
  b.clock.advance_ms(1);
  auto zeta2 = s.create_allocation(request("zeta", "web", 1), {}, nullptr);
  REQUIRE(zeta2);
  CHECK(s.get_allocation("zeta/web", "")->id == zeta2->id);
  CHECK(s.get_allocation("web", "zeta")->id == zeta2->id);
  REQUIRE(s.update_allocation_if(zeta2->id, std::nullopt, [](Allocation& x) {
    x.state = AllocationState::kReleased;
    return ok_status();
  }, {}));
  CHECK(s.get_allocation("zeta/web", "")->id == zeta2->id);
  // One tenant's name alone is not ambiguous across tenants.
  b.clock.advance_ms(1);
  auto solo = s.create_allocation(request("acme", "solo", 1), {}, nullptr);
  REQUIRE(solo);
  CHECK(s.get_allocation("solo", "")->id == solo->id);
}

TEMPLATE_TEST_CASE("conformance: allocations: concurrent creates of one name for one tenant, exactly one wins",
                   "[store][conformance][allocations][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  AllocationStore* handles[2] = {&b.allocations(), second.get()};
  add_tenant(b, "acme", {{"gpu", NodeKind::kBaremetal, 1000}});
  add_tenant(b, "zeta", {{"gpu", NodeKind::kBaremetal, 1000}});
  constexpr int kRounds = 10;
  // Enough nodes that only the name is contended.
  for (int i = 0; i < 4 * kRounds; ++i) add_node(b, pool_node("n" + std::to_string(i)));
  for (int round = 0; round < kRounds; ++round) {
    INFO("round " << round);
    const std::string name = "ci-" + std::to_string(round);
    std::atomic<int> ready{0};
    Result<Allocation> got[2] = {Error(Code::kInternal, "not run"), Error(Code::kInternal, "not run")};
    std::vector<std::thread> racers;
    for (int r = 0; r < 2; ++r)
      racers.emplace_back([&, r] {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        got[r] = handles[r]->create_allocation(request("acme", name, 1), {}, nullptr);
      });
    for (auto& t : racers) t.join();
    REQUIRE((got[0] ? 1 : 0) + (got[1] ? 1 : 0) == 1);
    const Result<Allocation>& loser = got[0] ? got[1] : got[0];
    CHECK(loser.error().code == Code::kConflict);
    REQUIRE(loser.error().fields.size() == 1);
    CHECK(loser.error().fields[0].field == "/name");
    // The loser claimed nothing: one node is held for the name, by the winner.
    const Allocation& winner = got[0] ? *got[0] : *got[1];
    auto live = b.allocations().list_allocations(AllocationFilter{"acme", std::nullopt});
    REQUIRE(live);
    int named = 0;
    for (const Allocation& a : *live) named += a.name == name ? 1 : 0;
    CHECK(named == 1);
    CHECK(b.allocations().get_allocation("acme/" + name, "")->id == winner.id);
    // Another tenant may use the same name at the same time.
    REQUIRE(b.allocations().create_allocation(request("zeta", name, 1), {}, nullptr));
  }
  int held = 0;
  for (int i = 0; i < 4 * kRounds; ++i) held += b.nodes().get_node("n" + std::to_string(i))->allocation.empty() ? 0 : 1;
  CHECK(held == 2 * kRounds);
}
