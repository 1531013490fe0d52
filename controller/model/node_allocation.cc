#include "controller/model/node_allocation.h"

namespace kiln {

bool belongs_to(const Node& n, const Allocation& a) {
  return (n.allocation == a.id || n.allocation.empty()) && n.tenant == a.tenant;
}

void claim_node(Node& n, const Allocation& a) {
  n.tenant = a.tenant;
  n.allocation = a.id;
  n.last_validation.clear();
}

void detach_node(Node& n) {
  n.allocation.clear();
  n.tenant.clear();
}

void allocation_after_verb(Node& n, ProvisionEvent verb, const std::string& allocation) {
  if (verb == ProvisionEvent::kDeploy)
    n.allocation = allocation;
  else if (verb == ProvisionEvent::kUndeploy || verb == ProvisionEvent::kProvide || verb == ProvisionEvent::kManage)
    n.allocation.clear();
}

}  // namespace kiln
