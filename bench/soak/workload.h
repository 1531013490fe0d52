#pragma once
// Workload: what the soak's users do, at random (seeded).
//
//   operator verbs   manage / inspect / provide / deploy / undeploy / abort on
//                    the ops and redfish nodes, mostly ones their state allows
//                    (as last sampled), now and then any verb (409 expected)
//   power verbs      on / off / reboot on the same nodes
//   allocations      each tenant asks for 1-3 nodes of the pool (now and then
//                    more than its quota: 403), sometimes with a 60-90 s lease;
//                    releases one of its own, renews a lease
//   tenant power     a tenant powers one of the nodes it holds
//   pool repair      an operator brings pool nodes that no allocation holds
//                    back to available (a kill -9 fails the cleaning or
//                    deploy it interrupts; pool-8 fails every deploy)
//
// Every answer is counted by action and status for the report; a status the
// action does not expect is also printed (the first few): the soak's own
// requests are well-formed, so a 400 or a 404 on one's own resource means
// something.
//
// Not thread-safe: the soak's driving thread.

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/soak/api_client.h"
#include "bench/soak/ownership.h"
#include "bench/soak/world.h"

namespace kiln::soak {

class Workload {
 public:
  Workload(ApiClient& api, const World& world, const Ownership& ownership, uint64_t seed, bool verbose);

  // The nodes as last sampled (staff view): what the verbs are picked from.
  void set_nodes(const nlohmann::json& nodes);
  // One action, drawn by weight.
  void act();
  void repair_pool();
  // Releases (as staff) every allocation that is not released yet; returns
  // how many were asked to release.
  int release_everything();

  // Every allocation the soak knows (id -> tenant), released or not.
  const std::map<std::string, std::string>& allocations() const { return tenant_of_; }
  nlohmann::json figures() const;

 private:
  struct Live {
    std::string id;
    std::string tenant;
  };

  void operator_verb();
  void power_verb();
  void create_allocation();
  void release_allocation();
  void renew_lease();
  void tenant_power();
  // Counts `r` under `what`; prints it when its status is not in `expected`.
  void count(const std::string& what, const Reply& r, std::initializer_list<int> expected);
  const nlohmann::json* sampled(const std::string& id) const;
  const TenantLogin& any_tenant();

  ApiClient& api_;
  const World& world_;
  const Ownership& ownership_;
  std::mt19937_64 rng_;
  bool verbose_;
  std::map<std::string, nlohmann::json> nodes_;  // id -> last sample
  std::map<std::string, std::string> tenant_of_;  // allocation id -> tenant
  std::vector<Live> live_;                        // created, not yet released by the soak
  int next_name_ = 0;
  std::map<std::string, std::map<std::string, int64_t>> counts_;  // action -> status -> n
  int unexpected_printed_ = 0;
};

}  // namespace kiln::soak
