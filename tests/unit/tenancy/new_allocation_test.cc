// A new allocation as tenancy starts it (controller/tenancy/new_allocation.h).
#include <catch2/catch.hpp>

#include "controller/model/allocation_states.h"
#include "controller/model/event_types.h"
#include "controller/tenancy/new_allocation.h"

using namespace kiln;

TEST_CASE("new allocation: fresh id, pending with one history row, the tenant given, a lease's expiry", "[tenancy]") {
  Allocation asked;
  asked.id = "chosen-by-the-caller";  // never kept: ids are the controller's
  asked.tenant = "someone-else";      // never kept: the caller decided whose
  asked.state = AllocationState::kReady;
  asked.profile = "h100-8x";
  asked.kind = NodeKind::kBaremetal;
  asked.count = 2;
  asked.lease_seconds = 90;
  Allocation a = new_allocation(asked, "acme", 1'000'000);
  CHECK(a.id.size() == 36);
  CHECK(a.id != asked.id);
  CHECK(a.tenant == "acme");
  CHECK(a.name == "alloc-" + a.id.substr(0, 8));
  CHECK(a.state == AllocationState::kPending);
  REQUIRE(a.history.size() == 1);
  CHECK(a.history[0].to == "pending");
  CHECK(a.expires_at == 1'000'000 + 90'000);
  CHECK(a.profile == "h100-8x");
  CHECK(a.count == 2);

  asked.name = "train-7";
  asked.lease_seconds = 0;
  Allocation named = new_allocation(asked, "acme", 5);
  CHECK(named.name == "train-7");
  CHECK(named.expires_at == 0);
  CHECK(named.id != a.id);
}

TEST_CASE("new allocation: the created event names the allocation, its tenant and who asked", "[tenancy]") {
  Allocation asked;
  asked.profile = "h100-8x";
  asked.kind = NodeKind::kVirtual;
  asked.count = 1;
  Allocation a = new_allocation(asked, "acme", 7);
  EventDraft ev = allocation_created_event(a, AllocationAsker{"ci-token", "tenant", "req-1"});
  CHECK(ev.type == event_type::kAllocationCreated);
  CHECK(ev.tenant == "acme");
  CHECK(ev.request_id == "req-1");
  CHECK(ev.to_state == "pending");
  CHECK(ev.detail["allocation"] == a.id);
  CHECK(ev.detail["allocation_name"] == a.name);
  CHECK(ev.detail["kind"] == "virtual");
  CHECK(ev.detail["actor"] == "ci-token");
  CHECK(ev.detail["role"] == "tenant");
}
