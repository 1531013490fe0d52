#pragma once
// IsolationProbe: tenant-isolation, from each tenant's own token.
//
// A probe of tenant T (one at a time, round robin) checks that T:
//   * lists only nodes whose tenant is T (GET /v1/nodes);
//   * lists only its own allocations (GET /v1/allocations), and gets 404
//     for another tenant's allocation by id, whether it reads it (GET),
//     releases it (DELETE) or renews its lease (PUT .../lease), the other
//     allocation staying as it was;
//   * gets 404 for a power action on a node another tenant holds;
//   * reads only its own usage rows (GET /v1/usage) and its own tenant
//     (GET /v1/tenants lists only T; another's name is 404);
//   * reads in its event feed (GET /v1/events?since=) only events that were
//     its own when they were written: an allocation's events for its
//     allocations, a node's events while it held the node (Ownership).
//     Events past what the admin feed has processed are left for the next
//     probe.
//
// Not thread-safe: the soak's driving thread.

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "bench/soak/api_client.h"
#include "bench/soak/findings.h"
#include "bench/soak/ownership.h"

namespace kiln::soak {

struct TenantLogin {
  std::string name;
  std::string token;
};

class IsolationProbe {
 public:
  IsolationProbe(ApiClient& api, Findings& findings, const Ownership& ownership, std::vector<TenantLogin> tenants,
                 std::string admin_token, uint64_t seed);

  // Probes the next tenant. `allocations`: every allocation id the soak
  // knows, with its tenant.
  void probe_next(const std::map<std::string, std::string>& allocations);
  // Probes every tenant (the end of the run).
  void probe_all(const std::map<std::string, std::string>& allocations);
  int64_t probes() const { return probes_; }

 private:
  void probe(const TenantLogin& t, const std::map<std::string, std::string>& allocations);
  void lists(const TenantLogin& t);
  void foreign_allocation(const TenantLogin& t, const std::map<std::string, std::string>& allocations);
  void foreign_node(const TenantLogin& t);
  void events(const TenantLogin& t);
  // A request by T that must be 404: broken otherwise.
  void expect_404(const TenantLogin& t, std::string_view method, const std::string& target,
                  const nlohmann::json& body, const std::string& what);

  ApiClient& api_;
  Findings& findings_;
  const Ownership& ownership_;
  std::vector<TenantLogin> tenants_;
  std::string admin_token_;
  std::mt19937_64 rng_;
  std::size_t next_ = 0;
  std::map<std::string, int64_t> cursor_;  // tenant -> last event seq checked
  int64_t probes_ = 0;
};

}  // namespace kiln::soak
