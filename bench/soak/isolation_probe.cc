#include "bench/soak/isolation_probe.h"

#include "bench/soak/api_values.h"

namespace kiln::soak {

namespace {

const nlohmann::json& list(const Reply& r, const char* key) {
  static const nlohmann::json empty = nlohmann::json::array();
  if (!r.body.is_object() || !r.body.contains(key) || !r.body[key].is_array()) return empty;
  return r.body[key];
}

}  // namespace

IsolationProbe::IsolationProbe(ApiClient& api, Findings& findings, const Ownership& ownership,
                               std::vector<TenantLogin> tenants, std::string admin_token, uint64_t seed)
    : api_(api), findings_(findings), ownership_(ownership), tenants_(std::move(tenants)),
      admin_token_(std::move(admin_token)), rng_(seed) {}

void IsolationProbe::probe_next(const std::map<std::string, std::string>& allocations) {
  probe(tenants_[next_], allocations);
  next_ = (next_ + 1) % tenants_.size();
}

void IsolationProbe::probe_all(const std::map<std::string, std::string>& allocations) {
  for (const TenantLogin& t : tenants_) probe(t, allocations);
}

void IsolationProbe::probe(const TenantLogin& t, const std::map<std::string, std::string>& allocations) {
  ++probes_;
  lists(t);
  foreign_allocation(t, allocations);
  foreign_node(t);
  events(t);
  findings_.checked(invariant::kTenantIsolation);
}

void IsolationProbe::expect_404(const TenantLogin& t, std::string_view method, const std::string& target,
                                const nlohmann::json& body, const std::string& what) {
  Reply r = api_.call(method, target, body, t.token);
  if (!r.reached || r.status == 404 || r.status == 503) return;
  findings_.broken(invariant::kTenantIsolation, t.name + "'s token: " + std::string(method) + " " + target + " (" +
                                                    what + ") answered " + std::to_string(r.status) + " " +
                                                    r.text.substr(0, 300));
}

void IsolationProbe::lists(const TenantLogin& t) {
  auto own = [&](const Reply& r, const char* key, const char* field, const std::string& what) {
    if (!r.reached || r.status == 503) return;
    if (r.status != 200) {
      findings_.broken(invariant::kTenantIsolation,
                       t.name + "'s token: " + what + " answered " + std::to_string(r.status) + " " + r.text.substr(0, 200));
      return;
    }
    for (const nlohmann::json& item : list(r, key))
      if (str(item.value(field, nlohmann::json())) != t.name)
        findings_.broken(invariant::kTenantIsolation, t.name + "'s token: " + what + " shows " + item.dump().substr(0, 300));
  };
  own(api_.get("/v1/nodes?limit=1000", t.token), "nodes", "tenant", "GET /v1/nodes");
  own(api_.get("/v1/allocations", t.token), "allocations", "tenant", "GET /v1/allocations");
  own(api_.get("/v1/usage", t.token), "usage", "tenant", "GET /v1/usage");
  own(api_.get("/v1/tenants", t.token), "tenants", "name", "GET /v1/tenants");
  for (const TenantLogin& other : tenants_)
    if (other.name != t.name) expect_404(t, "GET", "/v1/tenants/" + other.name, nullptr, "another tenant");
}

void IsolationProbe::foreign_allocation(const TenantLogin& t, const std::map<std::string, std::string>& allocations) {
  std::vector<std::string> foreign;
  for (const auto& [id, owner] : allocations)
    if (owner != t.name) foreign.push_back(id);
  if (foreign.empty()) return;
  const std::string id = foreign[std::uniform_int_distribution<std::size_t>(0, foreign.size() - 1)(rng_)];
  Reply before = api_.get("/v1/allocations/" + id, admin_token_);
  expect_404(t, "GET", "/v1/allocations/" + id, nullptr, "another tenant's allocation");
  expect_404(t, "DELETE", "/v1/allocations/" + id, nullptr, "releasing another tenant's allocation");
  expect_404(t, "PUT", "/v1/allocations/" + id + "/lease", nlohmann::json{{"lease_seconds", 3600}},
             "renewing another tenant's lease");
  Reply after = api_.get("/v1/allocations/" + id, admin_token_);
  if (!before.reached || !after.reached || before.status != 200 || after.status != 200) return;
  // Nothing T's token did may show: no release by it, no lease of its
  // making. (The engine may move the allocation meanwhile.)
  for (const nlohmann::json& h : after.body.value("history", nlohmann::json::array())) {
    // The soak names each tenant's token "soak-<tenant>" (world.h).
    const std::string reason = str(h.value("reason", nlohmann::json()));
    if (reason == "released by soak-" + t.name && str(after.body["tenant"]) != t.name)
      findings_.broken(invariant::kTenantIsolation,
                       "allocation " + id + " of " + str(after.body["tenant"]) + " has a history entry naming " +
                           t.name + ": " + h.dump());
  }
  if (after.body.value("lease_seconds", nlohmann::json()) == nlohmann::json(3600) &&
      before.body.value("lease_seconds", nlohmann::json()) != nlohmann::json(3600))
    findings_.broken(invariant::kTenantIsolation,
                     "allocation " + id + " of " + str(after.body["tenant"]) + " took the lease " + t.name +
                         "'s token asked for");
}

void IsolationProbe::foreign_node(const TenantLogin& t) {
  std::vector<std::string> foreign;
  for (const auto& [tenant, nodes] : ownership_.held())
    if (tenant != t.name) foreign.insert(foreign.end(), nodes.begin(), nodes.end());
  if (foreign.empty()) return;
  const std::string node = foreign[std::uniform_int_distribution<std::size_t>(0, foreign.size() - 1)(rng_)];
  Reply r = api_.call("PUT", "/v1/nodes/" + node + "/states/power", nlohmann::json{{"target", "on"}}, t.token);
  if (!r.reached || r.status == 404 || r.status == 503) return;
  // The node may have become T's own meanwhile (released, then claimed).
  if (ownership_.holder(node) == t.name) return;
  Reply now = api_.get("/v1/nodes/" + node, admin_token_);
  if (now.reached && now.status == 200 && str(now.body.value("tenant", nlohmann::json())) == t.name) return;
  findings_.broken(invariant::kTenantIsolation, t.name + "'s token: a power action on node " + node +
                                                    " held by another tenant answered " + std::to_string(r.status) +
                                                    " " + r.text.substr(0, 200));
}

void IsolationProbe::events(const TenantLogin& t) {
  int64_t& cursor = cursor_[t.name];
  const int64_t known = ownership_.processed_seq();
  while (cursor < known) {
    Reply r = api_.get("/v1/events?limit=1000&since=" + std::to_string(cursor), t.token);
    if (!r.reached || r.status != 200) return;
    const nlohmann::json& page = list(r, "events");
    if (page.empty()) {
      cursor = known;
      return;
    }
    for (const nlohmann::json& j : page) {
      std::optional<Event> e = parse_event(j);
      if (!e) continue;
      if (e->seq > known) return;  // the admin feed has not reached it yet: next probe
      cursor = e->seq;
      findings_.checked(invariant::kTenantIsolation);
      std::string owner;
      const std::string allocation = e->text("allocation");
      if (!allocation.empty() && (e->type.rfind("allocation.", 0) == 0 || e->node.empty()))
        owner = ownership_.allocation_tenant(allocation);
      else if (!e->node.empty())
        owner = ownership_.owner_at(e->node, e->seq);
      if (owner != t.name)
        findings_.broken(invariant::kTenantIsolation,
                         t.name + "'s event feed shows seq " + std::to_string(e->seq) + " (" + e->type + ", node " +
                             e->node + "), which was " + (owner.empty() ? "no tenant's" : owner + "'s") +
                             " when it was written");
    }
    if (page.size() < 1000) {
      cursor = std::max(cursor, known);
      return;
    }
  }
}

}  // namespace kiln::soak
