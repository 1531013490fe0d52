// The allocation engine against a real SQLite store, the real conductor and
// fake-driver nodes, driven batch by batch with run_pass() (the engine is
// never start()ed), its store calls counted on the way through: a batch
// reads only the allocations its events name, with one store call however
// many there are, and reconciles only those that changed; and billing starts
// at the ready time, written with the move to ready.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>

#include "tests/unit/tenancy/allocation_engine_harness.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("allocation engine: after one member's event a batch reconciles that allocation alone, in two store calls",
          "[allocations][engine]") {
  // Before, every kick read and reconciled every allocation in flight, its
  // members' nodes one store call each: here K allocations, K reconciles and
  // 1 + 2K store calls for one node's event.
  constexpr int kAllocations = 12;
  Harness h;
  for (int i = 0; i < kAllocations * 2; ++i) h.pool_node("n" + std::to_string(i));
  std::vector<std::string> ids;
  for (int i = 0; i < kAllocations; ++i) ids.push_back(h.allocate("a" + std::to_string(i), 2).id);
  h.settle(ids, AllocationState::kReady);
  h.quiet();

  // Nothing happened: one call (the events since the last batch), nothing
  // reconciled.
  h.counting_->reset();
  uint64_t before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  CHECK(h.engine_->reconciles() == before);
  CHECK(h.counting_->calls() == std::map<std::string, uint64_t>{{"list_events", 1}});

  // One member of one allocation changes (with its event): put in
  // maintenance, which an active member serves through.
  Allocation target = *h.store_->get_allocation(ids[5], "");
  const std::string member = target.members.at(1).node_id;
  EventDraft touched;
  touched.type = "node.maintenance";
  REQUIRE(h.store_->update_node_if(member, {}, [](Node& n) {
    n.maintenance = true;
    n.maintenance_reason = "firmware";
    return ok_status();
  }, {touched}));
  h.counting_->reset();
  before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  INFO(describe(h.counting_->calls()));
  CHECK(h.engine_->reconciles() == before + 1);
  // The events, then that allocation and its members' nodes in one call; its
  // reconcile finds every member serving and writes nothing.
  CHECK(h.counting_->total() <= 2);
  CHECK(h.counting_->calls() == std::map<std::string, uint64_t>{{"list_events", 1}, {"in_flight_with_nodes", 1}});
  CHECK(h.store_->get_allocation(ids[5], "")->state == AllocationState::kReady);

  // The same event read again changes nothing: nothing more is reconciled.
  h.counting_->reset();
  before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  CHECK(h.engine_->reconciles() == before);
  CHECK(h.counting_->calls() == std::map<std::string, uint64_t>{{"list_events", 1}});

  // A change to a member that nothing the engine judges depends on (its
  // Ironic fields) is read, but not reconciled.
  EventDraft edited;
  edited.type = "node.updated";
  REQUIRE(h.store_->update_node_if(member, {}, [](Node& n) {
    n.ironic["extra"] = {{"rack", "r7"}};
    return ok_status();
  }, {edited}));
  h.counting_->reset();
  before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  CHECK(h.engine_->reconciles() == before);
  CHECK(h.counting_->total() <= 2);
}

TEST_CASE("allocation engine: a member that fails is replaced, and only its allocation is touched",
          "[allocations][engine]") {
  Harness h;
  for (int i = 0; i < 7; ++i) h.pool_node("n" + std::to_string(i));
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(h.allocate("a" + std::to_string(i), 2).id);
  h.settle(ids, AllocationState::kReady);
  h.quiet();

  // One member fails: the engine replaces it from the pool (the seventh
  // node) and the allocation is ready again.
  Allocation target = *h.store_->get_allocation(ids[1], "");
  const std::string failed = target.members.at(0).node_id;
  EventDraft e;
  e.type = "provision.transition";
  REQUIRE(h.store_->update_node_if(failed, {}, [](Node& n) {
    n.provision_state = ProvisionState::kDeployFailed;
    n.last_error = "disk gone";
    return ok_status();
  }, {e}));
  const uint64_t before = h.engine_->reconciles();
  h.sync(h.engine_->run_pass());
  CHECK(h.engine_->reconciles() == before + 1);
  h.settle({ids[1]}, AllocationState::kReady);
  Allocation after = *h.store_->get_allocation(ids[1], "");
  CHECK(after.replacements == 1);
  std::set<std::string> serving;
  for (const AllocationMember& m : after.members)
    if (m.status == MemberStatus::kMember) serving.insert(m.node_id);
  CHECK(serving.size() == 2);
  CHECK_FALSE(serving.contains(failed));
  // The others never moved.
  for (const std::string& id : {ids[0], ids[2]}) {
    Allocation other = *h.store_->get_allocation(id, "");
    CHECK(other.replacements == 0);
    CHECK(other.history.size() == 2);  // provisioning, ready
  }
  CHECK(h.store_->get_node(failed)->allocation.empty());
}

TEST_CASE("allocation engine: a release writes its members' departures together, not one store write per member",
          "[allocations][engine]") {
  // Each member used to leave in a transaction of its own: twice per member
  // (leaving as it is undeployed, left once it is clean). The first giving
  // back finds all four members active and undeploys them: their four
  // departures are one write.
  Harness h;
  for (int i = 0; i < 4; ++i) h.pool_node("n" + std::to_string(i));
  std::string id = h.allocate("web", 4).id;
  h.settle({id}, AllocationState::kReady);
  h.quiet();
  h.counting_->reset();
  REQUIRE(h.sync(h.engine_->release(id, "done", "test", "")));
  h.settle({id}, AllocationState::kReleased);
  INFO(describe(h.counting_->calls()));
  CHECK(h.counting_->calls().count("leave_member") == 0);
  const uint64_t writes = h.counting_->calls()["leave_members"];
  CHECK(writes >= 2);  // leaving, then left
  CHECK(writes < 8);   // 4 members x 2 moves, had each been its own write
  Allocation a = *h.store_->get_allocation(id, "");
  for (const AllocationMember& m : a.members) CHECK(m.status == MemberStatus::kLeft);
  for (const AllocationMember& m : a.members) CHECK(h.store_->get_node(m.node_id)->allocation.empty());
}

TEST_CASE("allocation engine: every member is billed from the moment the allocation became ready",
          "[allocations][engine][usage]") {
  // The rows open in the move to ready's own transaction (AllocationStore::
  // update_allocation_with_usage), so no kill -9 between the two can leave a
  // ready allocation unbilled; their start is the ready time.
  Harness h;
  for (int i = 0; i < 3; ++i) h.pool_node("n" + std::to_string(i));
  std::string id = h.allocate("web", 3).id;
  h.settle({id}, AllocationState::kReady);
  Allocation a = *h.store_->get_allocation(id, "");
  REQUIRE(a.ready_at > 0);
  REQUIRE_FALSE(a.history.empty());
  CHECK(a.history.back().to == "ready");
  CHECK(a.history.back().at == a.ready_at);
  Result<std::vector<UsageRecord>> rows = h.store_->list_usage(UsageFilter{std::nullopt, id, 0, 0});
  REQUIRE(rows);
  REQUIRE(rows->size() == 3);
  std::set<std::string> billed;
  for (const UsageRecord& u : *rows) {
    CHECK(u.started_at == a.ready_at);
    CHECK_FALSE(u.ended_at);
    billed.insert(u.node_id);
  }
  std::set<std::string> members;
  for (const AllocationMember& m : a.members) members.insert(m.node_id);
  CHECK(billed == members);
  // The ready move and the opening of the rows were one store call.
  CHECK(h.counting_->calls().count("open_usage") == 0);

  // Released: the rows close at the release, in its transaction.
  Result<Allocation> released = h.sync(h.engine_->release(id, "done", "test", ""));
  REQUIRE(released);
  CHECK(released->state == AllocationState::kReleasing);
  rows = h.store_->list_usage(UsageFilter{std::nullopt, id, 0, 0});
  REQUIRE(rows);
  for (const UsageRecord& u : *rows) CHECK(u.ended_at == released->history.back().at);
  h.settle({id}, AllocationState::kReleased);
  CHECK(h.counting_->calls().count("close_usage") == 0);
}

TEST_CASE("allocation engine: usage rows still open when an allocation is released close with that move",
          "[allocations][engine][usage]") {
  // An allocation that a kilnd from before left releasing with its members'
  // rows open (its close a separate write a crash could lose): giving back
  // closes them, and where that close fails as well, the move to released
  // closes them in its own transaction rather than leaving them billed for
  // good once nothing drives the allocation. They end when giving back
  // began, whichever write closes them.
  Harness h;
  for (int i = 0; i < 3; ++i) h.pool_node("n" + std::to_string(i));
  const std::string id = h.allocate("web", 3).id;
  h.settle({id}, AllocationState::kReady);
  int64_t releasing_at = 0;
  EventDraft e;
  e.type = "allocation.transition";
  e.tenant = "acme";
  e.detail = {{"allocation", id}};
  REQUIRE(h.store_->update_allocation_if(id, std::nullopt, [&](Allocation& a) {
    releasing_at = h.clock_.now_ms();
    a.history.push_back({releasing_at, "ready", "releasing", "done"});
    a.state = AllocationState::kReleasing;
    return ok_status();
  }, {e}));
  h.counting_->fail("close_usage", Error(Code::kInternal, "ledger refused"), 1000);
  h.settle({id}, AllocationState::kReleased);
  CHECK(h.counting_->calls()["close_usage"] >= 1);  // giving back tried, and failed
  Result<std::vector<UsageRecord>> rows = h.store_->list_usage(UsageFilter{std::nullopt, id, 0, 0});
  REQUIRE(rows);
  REQUIRE(rows->size() == 3);
  for (const UsageRecord& u : *rows) CHECK(u.ended_at == releasing_at);
}
