#include "bench/soak/quota_probe.h"

#include "bench/soak/api_values.h"

namespace kiln::soak {

void probe_quotas(ApiClient& api, Findings& findings, const World& world, const nlohmann::json& nodes) {
  std::map<std::string, int64_t> held;
  for (const nlohmann::json& n : nodes)
    if (str(n.value("profile", nlohmann::json())) == world.profile && str(n.value("kind", nlohmann::json())) == "baremetal")
      ++held[str(n.value("tenant", nlohmann::json()))];
  for (const auto& [tenant, quota] : world.quotas) {
    if (held[tenant] > quota)
      findings.broken(invariant::kQuotaNeverExceeded, "the node list shows " + std::to_string(held[tenant]) + " " +
                                                          world.profile + " nodes of " + tenant + ", its quota is " +
                                                          std::to_string(quota));
    Reply r = api.get("/v1/tenants/" + tenant, world.admin_token);
    if (!r.reached || r.status != 200 || !r.body.is_object()) continue;
    for (const nlohmann::json& q : r.body.value("quotas", nlohmann::json::array())) {
      const int64_t in_use = q.value("in_use", int64_t{0});
      const int64_t max = q.value("max_nodes", int64_t{0});
      if (in_use > max)
        findings.broken(invariant::kQuotaNeverExceeded,
                        "GET /v1/tenants/" + tenant + " shows " + q.dump() + ": in use beyond its quota");
    }
    findings.checked(invariant::kQuotaNeverExceeded);
  }
}

}  // namespace kiln::soak
