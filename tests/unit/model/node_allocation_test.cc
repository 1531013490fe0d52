// The rule that writes node.tenant and node.allocation, and "does this node
// still belong to that allocation" (controller/model/node_allocation.h).

#include <catch2/catch.hpp>

#include "controller/model/node_allocation.h"

namespace kiln {
namespace {

Allocation alloc(const std::string& id, const std::string& tenant) {
  Allocation a;
  a.id = id;
  a.tenant = tenant;
  return a;
}

Node node_of(const std::string& tenant, const std::string& allocation) {
  Node n;
  n.id = "n1";
  n.tenant = tenant;
  n.allocation = allocation;
  return n;
}

}  // namespace

TEST_CASE("node allocation: a node belongs to the allocation it names, or to none, of the same tenant",
          "[model][allocation]") {
  const Allocation a = alloc("a1", "acme");
  CHECK(belongs_to(node_of("acme", "a1"), a));
  CHECK(belongs_to(node_of("acme", ""), a));  // an undeploy cleared it; the tenant still holds it
  CHECK_FALSE(belongs_to(node_of("acme", "a2"), a));  // another allocation of the same tenant
  CHECK_FALSE(belongs_to(node_of("zeta", "a1"), a));  // an operator gave it to someone else
  CHECK_FALSE(belongs_to(node_of("", ""), a));        // back in the pool
}

TEST_CASE("node allocation: a claim sets tenant and allocation and forgets the last report, a detach clears both",
          "[model][allocation]") {
  Node n = node_of("", "");
  n.last_validation = "v-old";
  claim_node(n, alloc("a1", "acme"));
  CHECK(n.tenant == "acme");
  CHECK(n.allocation == "a1");
  CHECK(n.last_validation.empty());
  CHECK(belongs_to(n, alloc("a1", "acme")));
  detach_node(n);
  CHECK(n.tenant.empty());
  CHECK(n.allocation.empty());
  CHECK_FALSE(belongs_to(n, alloc("a1", "acme")));
}

TEST_CASE("node allocation: a deploy names its allocation, the verbs back to the pool clear it, others leave it",
          "[model][allocation]") {
  Node n = node_of("acme", "");
  allocation_after_verb(n, ProvisionEvent::kDeploy, "a1");
  CHECK(n.allocation == "a1");
  for (ProvisionEvent keeps : {ProvisionEvent::kInspect, ProvisionEvent::kAbort, ProvisionEvent::kDone, ProvisionEvent::kFail}) {
    allocation_after_verb(n, keeps, "other");
    CHECK(n.allocation == "a1");
  }
  for (ProvisionEvent clears : {ProvisionEvent::kUndeploy, ProvisionEvent::kProvide, ProvisionEvent::kManage}) {
    n.allocation = "a1";
    allocation_after_verb(n, clears, "a1");
    CHECK(n.allocation.empty());
    CHECK(n.tenant == "acme");  // the tenant goes only when the allocation detaches the node
  }
  allocation_after_verb(n, ProvisionEvent::kDeploy, "");  // a direct deploy names none
  CHECK(n.allocation.empty());
}

}  // namespace kiln
