#pragma once
// quota-never-exceeded as the API shows it, sampled (Ownership checks the
// same at every claim in the event log): each tenant's view (GET
// /v1/tenants/{name}, as staff) has in_use <= max_nodes for every quota, and
// the staff node list has no more of a tenant's nodes of the quota's profile
// than its quota.
//
// Blocking; the soak's driving thread.

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/soak/api_client.h"
#include "bench/soak/findings.h"
#include "bench/soak/world.h"

namespace kiln::soak {

// `nodes`: the last staff sample of GET /v1/nodes' nodes.
void probe_quotas(ApiClient& api, Findings& findings, const World& world, const nlohmann::json& nodes);

}  // namespace kiln::soak
