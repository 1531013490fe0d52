// The allocation engine's timing (allocation_engine_harness.h): what a batch
// does with a read that a reconcile's end overtook, when the loop wakes
// without a kick (a failed reconcile's retry, a lease that ends while its
// allocation is being reconciled) and when it must not (an idle engine).
// Store calls are held at a gate or failed to put the engine where a loaded
// machine can put it by chance.
#include <catch2/catch.hpp>

#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "controller/model/event_types.h"
#include "tests/unit/tenancy/allocation_engine_harness.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Member `node_id`'s deploy fails, with an event (as the conductor writes one).
void fail_member(Harness& h, const std::string& node_id) {
  EventDraft e;
  e.type = "provision.transition";
  REQUIRE(h.store_->update_node_if(node_id, {}, [](Node& n) {
    n.provision_state = ProvisionState::kDeployFailed;
    n.last_error = "disk gone";
    return ok_status();
  }, {e}));
}

// The lease of `id` ends `in` from now; written with the event a renewal
// writes. Returns the lease end.
int64_t lease_ends(Harness& h, const std::string& id, std::chrono::milliseconds in) {
  EventDraft e;
  e.type = event_type::kAllocationLease;
  e.tenant = "acme";
  e.detail = {{"allocation", id}};
  const int64_t at = h.clock_.now_ms() + in.count();
  REQUIRE(h.store_->update_allocation_if(id, std::nullopt, [at](Allocation& a) {
    a.expires_at = at;
    return ok_status();
  }, {e}));
  return at;
}

// Waits (at most `limit`) until the engine has reaped the lease of `id`.
bool reaped(Harness& h, const std::string& id, std::chrono::milliseconds limit) {
  return kiln::testing::wait_until([&] {
    Result<Allocation> a = h.store_->get_allocation(id, "");
    if (!a) return false;
    for (const AllocationHistoryEntry& e : a->history)
      if (e.to == "releasing" && e.reason.find("lease expired") != std::string::npos) return true;
    return false;
  }, limit);
}

// Waits until a started engine has made no batch for 300 ms: the events of
// its last moves read and judged.
void idle(Harness& h) {
  REQUIRE(kiln::testing::wait_until([&] {
    const uint64_t before = h.engine_->passes();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    return h.engine_->passes() == before;
  }, std::chrono::seconds(20), std::chrono::milliseconds(0)));
}

std::future<void> pass_in_background(Harness& h) {
  return asio::co_spawn(h.io_, h.engine_->run_pass(), asio::use_future);
}

}  // namespace

TEST_CASE("allocation engine: a batch whose read a reconcile's end overtook reads that allocation again",
          "[allocations][engine][stale]") {
  // finished() runs on the strand while a batch waits for its store hop, so
  // the hop can return a state from before the writes of a reconcile that
  // ended meanwhile. Judged from it, a member just replaced was "replaced"
  // again: it left once more and another node was claimed (and billed) in
  // its place, or, with none free, a healthy allocation failed.
  Harness h;
  for (int i = 0; i < 5; ++i) h.pool_node("n" + std::to_string(i));
  const std::string id = h.allocate("web", 2).id;
  h.settle({id}, AllocationState::kReady);
  h.quiet();
  const std::string failed = h.store_->get_allocation(id, "")->members.at(0).node_id;

  // The first batch's reconcile replaces the failed member; it is held just
  // before the member leaves (its node is being undeployed by then).
  Gate& leave = h.counting_->gate("leave_member");
  leave.arm();
  fail_member(h, failed);
  std::future<void> first = pass_in_background(h);
  REQUIRE(leave.entered(std::chrono::seconds(20)));
  // A second batch reads the allocation now (the undeploy's events name its
  // member) and is held with that read.
  Gate& read = h.counting_->gate("in_flight_with_nodes");
  read.arm();
  std::future<void> second = pass_in_background(h);
  REQUIRE(read.entered(std::chrono::seconds(20)));
  // The reconcile ends (the first batch waits for it); then the second
  // batch's read, older than its writes, comes back.
  const uint64_t before = h.engine_->reconciles();
  leave.open();
  first.get();
  read.open();
  second.get();
  CHECK(h.engine_->reconciles() == before);  // read again, not judged

  h.settle({id}, AllocationState::kReady);
  h.quiet();
  Allocation after = *h.store_->get_allocation(id, "");
  CHECK(after.replacements == 1);
  std::set<std::string> serving;
  for (const AllocationMember& m : after.members)
    if (m.status == MemberStatus::kMember) serving.insert(m.node_id);
  CHECK(serving.size() == 2);
  CHECK_FALSE(serving.contains(failed));
  // One node was claimed in the failed one's place, no more.
  Result<std::vector<Node>> nodes = h.store_->list_nodes({}, {});
  REQUIRE(nodes);
  std::set<std::string> held;
  for (const Node& n : *nodes)
    if (n.allocation == id) held.insert(n.id);
  CHECK(held == serving);
}

TEST_CASE("allocation engine: a reconcile that fails is retried an interval later, not at the loop's old deadline",
          "[allocations][engine][wake]") {
  // The loop sets its timer after each batch; a reconcile that ends later
  // with something undone sets the sweep that retries it, and the timer must
  // then be set again. It was not, so the retry waited for the deadline the
  // loop had chosen before: a day, with nothing else due.
  AllocationEngineOptions eo;
  eo.interval = std::chrono::milliseconds(200);
  Harness h(eo);
  for (int i = 0; i < 2; ++i) h.pool_node("n" + std::to_string(i));
  const std::string id = h.allocate("web", 2).id;
  h.start();
  REQUIRE(h.reaches(id, AllocationState::kReady));
  idle(h);
  // Its lease ends, and the engine's first attempt to reap it fails (the
  // store was unreachable for a moment): nothing is written, no event comes.
  h.counting_->fail("update_allocation_with_usage", Error(Code::kUnavailable, "store unreachable for a moment"));
  lease_ends(h, id, std::chrono::milliseconds(300));
  CHECK(reaped(h, id, std::chrono::seconds(5)));
}

TEST_CASE("allocation engine: a lease that ends while its allocation is reconciled is reaped when that reconcile ends",
          "[allocations][engine][wake][lease]") {
  // The batch at the lease end skipped an allocation being reconciled, and
  // the loop's deadlines ignored a lease already past: reaped only at an
  // unrelated event or sweep (here an hour away).
  Harness h;
  for (int i = 0; i < 3; ++i) h.pool_node("n" + std::to_string(i));
  const std::string id = h.allocate("web", 2).id;
  h.start();
  REQUIRE(h.reaches(id, AllocationState::kReady));
  idle(h);
  const std::string failed = h.store_->get_allocation(id, "")->members.at(0).node_id;
  const int64_t lease_end = lease_ends(h, id, std::chrono::seconds(3));
  // A member fails: its replacement begins by closing the member's usage
  // row, held there until after the lease end, and then refused (so it
  // writes nothing and no event comes).
  Gate& close = h.counting_->gate("close_usage");
  close.arm();
  h.counting_->fail("close_usage", Error(Code::kInternal, "ledger refused"));
  fail_member(h, failed);
  REQUIRE(close.entered(std::chrono::seconds(20)));
  REQUIRE(h.clock_.now_ms() < lease_end);  // else the reconcile saw the lease over
  std::this_thread::sleep_for(std::chrono::milliseconds(lease_end - h.clock_.now_ms() + 500));
  close.open();
  CHECK(reaped(h, id, std::chrono::seconds(5)));
}

TEST_CASE("allocation engine: an idle engine makes no batch, however often its timer runs out",
          "[allocations][engine][idle]") {
  // With nothing due the loop slept a day at a time, and ran a batch (a
  // list_events call) each time it woke. Here it wakes every 20 ms.
  AllocationEngineOptions eo = test_engine_options();
  eo.longest_sleep = std::chrono::milliseconds(20);
  Harness h(eo);
  h.start();
  // The sweep at start, then nothing: nothing in flight, no kick.
  REQUIRE(kiln::testing::wait_until([&] { return h.engine_->passes() >= 1; }, std::chrono::seconds(20)));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(h.engine_->passes() == 1);
  CHECK(h.counting_->calls() == std::map<std::string, uint64_t>{{"last_event_seq", 1}, {"in_flight_with_nodes", 1}});

  // Nor with a ready allocation whose members all serve.
  for (int i = 0; i < 2; ++i) h.pool_node("n" + std::to_string(i));
  const std::string id = h.allocate("web", 2).id;
  REQUIRE(h.reaches(id, AllocationState::kReady));
  idle(h);
  const uint64_t settled = h.engine_->passes();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(h.engine_->passes() == settled);
}

TEST_CASE("allocation engine: another conductor's allocation costs no sweep, and is taken over when its owner stops",
          "[allocations][engine][ring]") {
  // An allocation another conductor owns used to count as moving, so every
  // conductor swept every allocation in flight every interval, for as long
  // as there were several. Ownership moves only when the ring changes: the
  // engine sweeps then.
  AllocationEngineOptions eo;
  eo.interval = std::chrono::milliseconds(100);
  Harness h(eo, /*ring=*/true);
  const std::string other = "other-conductor";
  REQUIRE(h.store_->register_conductor(ConductorRecord{other, "other-host", "http://other-host:8080"}));
  REQUIRE(kiln::testing::wait_until([&] { return h.membership_->view()->ring().members().size() == 2; },
                                    std::chrono::seconds(5)));
  h.start();
  for (int i = 0; i < 2; ++i) h.pool_node("n" + std::to_string(i));
  std::string id = new_uuid();
  while (h.membership_->view()->owner_of(id) != other) id = new_uuid();
  h.allocate("theirs", 2, id);
  idle(h);
  // Read (its creation kicked a batch) and left alone: no sweep every 100 ms.
  CHECK(h.store_->get_allocation(id, "")->state == AllocationState::kPending);
  const uint64_t before = h.engine_->passes();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(h.engine_->passes() == before);
  // Its owner stops: at the ring change this conductor owns it, and drives it.
  REQUIRE(h.store_->stop_conductor(other));
  CHECK(h.reaches(id, AllocationState::kReady));
}
