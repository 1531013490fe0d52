#include "controller/tenancy/new_allocation.h"

#include <utility>

#include "common/ids.h"
#include "controller/model/allocation_states.h"
#include "controller/model/event_types.h"

namespace kiln {

Allocation new_allocation(Allocation requested, const std::string& tenant, int64_t now_ms) {
  Allocation a = std::move(requested);
  a.tenant = tenant;
  a.id = new_uuid();
  if (a.name.empty()) a.name = "alloc-" + a.id.substr(0, 8);
  a.state = AllocationState::kPending;
  a.history.clear();
  a.history.push_back({now_ms, "", std::string(to_string(AllocationState::kPending)), ""});
  if (a.lease_seconds > 0) a.expires_at = now_ms + a.lease_seconds * 1000;
  return a;
}

EventDraft allocation_created_event(const Allocation& a, const AllocationAsker& asker) {
  EventDraft ev;
  ev.type = event_type::kAllocationCreated;
  ev.tenant = a.tenant;
  ev.request_id = asker.request_id;
  ev.to_state = std::string(to_string(a.state));
  ev.detail = {{"allocation", a.id}, {"allocation_name", a.name}, {"profile", a.profile}, {"kind", to_string(a.kind)},
               {"count", a.count}, {"actor", asker.name}, {"role", asker.role}};
  return ev;
}

}  // namespace kiln
