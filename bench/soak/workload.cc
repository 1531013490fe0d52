#include "bench/soak/workload.h"

#include <iostream>

#include "bench/soak/api_values.h"

namespace kiln::soak {

namespace {

using nlohmann::json;

const char* const kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 soak@kiln";

// The verbs worth trying on a node in each stable state.
const std::map<std::string, std::vector<std::string>>& verbs_by_state() {
  static const std::map<std::string, std::vector<std::string>> v = {
      {"enroll", {"manage"}},
      {"manageable", {"inspect", "provide", "inspect"}},
      {"available", {"deploy", "manage"}},
      {"active", {"undeploy"}},
      {"deploy_failed", {"undeploy", "manage"}},
      {"inspect_failed", {"manage"}},
      {"clean_failed", {"manage"}},
      {"quarantined", {"manage"}},
  };
  return v;
}

const std::vector<std::string> kAllVerbs = {"manage", "inspect", "provide", "deploy", "undeploy", "abort"};

// Unexpected answers printed per run.
constexpr int kPrinted = 20;

}  // namespace

Workload::Workload(ApiClient& api, const World& world, const Ownership& ownership, uint64_t seed, bool verbose)
    : api_(api), world_(world), ownership_(ownership), rng_(seed), verbose_(verbose) {}

void Workload::set_nodes(const json& nodes) {
  nodes_.clear();
  for (const json& n : nodes) nodes_[str(n["id"])] = n;
}

const json* Workload::sampled(const std::string& id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

const TenantLogin& Workload::any_tenant() {
  return world_.tenants[std::uniform_int_distribution<std::size_t>(0, world_.tenants.size() - 1)(rng_)];
}

void Workload::count(const std::string& what, const Reply& r, std::initializer_list<int> expected) {
  const std::string key = r.reached ? std::to_string(r.status) : "unreached";
  ++counts_[what][key];
  if (!r.reached || r.status == 503) return;
  for (int e : expected)
    if (e == r.status) return;
  ++counts_[what]["unexpected"];
  if (verbose_ || unexpected_printed_++ < kPrinted)
    std::cerr << "kiln-soak: unexpected answer to " << what << ": " << r.status << " " << r.text.substr(0, 300)
              << std::endl;
}

void Workload::act() {
  // Weights: operator verbs, power, create, release, renew, tenant power.
  static const std::vector<int> weights = {30, 10, 20, 12, 5, 8};
  std::discrete_distribution<int> pick(weights.begin(), weights.end());
  switch (pick(rng_)) {
    case 0: operator_verb(); break;
    case 1: power_verb(); break;
    case 2: create_allocation(); break;
    case 3: release_allocation(); break;
    case 4: renew_lease(); break;
    default: tenant_power(); break;
  }
}

void Workload::operator_verb() {
  std::vector<const WorldNode*> nodes = world_.with_role(NodeRole::kOps);
  for (const WorldNode* n : world_.with_role(NodeRole::kRedfish)) nodes.push_back(n);
  const WorldNode& n = *nodes[std::uniform_int_distribution<std::size_t>(0, nodes.size() - 1)(rng_)];
  const json* s = sampled(n.id);
  const std::string state = s ? str((*s)["provision_state"]) : "";
  std::string verb;
  if (std::uniform_int_distribution<int>(0, 9)(rng_) == 0) {
    verb = kAllVerbs[std::uniform_int_distribution<std::size_t>(0, kAllVerbs.size() - 1)(rng_)];
  } else if (transient(state)) {
    if (std::uniform_int_distribution<int>(0, 9)(rng_) != 0) return;  // let most operations finish
    verb = "abort";
  } else {
    auto it = verbs_by_state().find(state);
    if (it == verbs_by_state().end()) return;
    verb = it->second[std::uniform_int_distribution<std::size_t>(0, it->second.size() - 1)(rng_)];
  }
  json body = {{"target", verb}};
  if (verb == "deploy") body["image"] = world_.image;
  Reply r = api_.call("PUT", "/v1/nodes/" + n.id + "/states/provision", body, world_.admin_token);
  count("provision:" + verb, r, {202, 409});
}

void Workload::power_verb() {
  std::vector<const WorldNode*> nodes = world_.with_role(NodeRole::kOps);
  for (const WorldNode* n : world_.with_role(NodeRole::kRedfish)) nodes.push_back(n);
  const WorldNode& n = *nodes[std::uniform_int_distribution<std::size_t>(0, nodes.size() - 1)(rng_)];
  static const std::vector<std::string> targets = {"on", "off", "reboot"};
  const std::string target = targets[std::uniform_int_distribution<std::size_t>(0, 2)(rng_)];
  Reply r = api_.call("PUT", "/v1/nodes/" + n.id + "/states/power", json{{"target", target}}, world_.admin_token);
  count("power:" + target, r, {202, 409});
}

void Workload::create_allocation() {
  const TenantLogin& t = any_tenant();
  const int64_t quota = world_.quotas.at(t.name);
  // Mostly what a quota allows; one time in eight more than it (403).
  const int64_t count_nodes = std::uniform_int_distribution<int>(0, 7)(rng_) == 0
                                  ? quota + 1
                                  : std::uniform_int_distribution<int64_t>(1, std::min<int64_t>(3, quota))(rng_);
  const std::string name = t.name + "-" + std::to_string(++next_name_);
  json body = {{"name", name}, {"profile", world_.profile}, {"kind", "baremetal"}, {"count", count_nodes},
               {"image", world_.image}, {"ssh_keys", json::array({kKey})}};
  if (std::uniform_int_distribution<int>(0, 9)(rng_) < 4)
    body["lease_seconds"] = std::uniform_int_distribution<int>(60, 90)(rng_);
  Reply r = api_.call("POST", "/v1/allocations", body, t.token);
  count("allocation:create", r, {202, 403, 409});
  if (r.reached && r.status == 202 && r.body.is_object()) {
    const std::string id = str(r.body["id"]);
    tenant_of_[id] = t.name;
    live_.push_back({id, t.name});
  }
}

void Workload::release_allocation() {
  const TenantLogin& t = any_tenant();
  std::vector<std::size_t> mine;
  for (std::size_t i = 0; i < live_.size(); ++i)
    if (live_[i].tenant == t.name) mine.push_back(i);
  if (mine.empty()) return;
  const std::size_t i = mine[std::uniform_int_distribution<std::size_t>(0, mine.size() - 1)(rng_)];
  Reply r = api_.call("DELETE", "/v1/allocations/" + live_[i].id, nullptr, t.token);
  count("allocation:release", r, {202});
  if (r.reached && r.status == 202) live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(i));
}

void Workload::renew_lease() {
  if (live_.empty()) return;
  const Live& a = live_[std::uniform_int_distribution<std::size_t>(0, live_.size() - 1)(rng_)];
  std::string token;
  for (const TenantLogin& t : world_.tenants)
    if (t.name == a.tenant) token = t.token;
  Reply r = api_.call("PUT", "/v1/allocations/" + a.id + "/lease",
                      json{{"lease_seconds", std::uniform_int_distribution<int>(60, 120)(rng_)}}, token);
  count("allocation:renew", r, {200, 409});
}

void Workload::tenant_power() {
  const TenantLogin& t = any_tenant();
  auto held = ownership_.held();
  auto it = held.find(t.name);
  if (it == held.end() || it->second.empty()) return;
  const std::string& node = it->second[std::uniform_int_distribution<std::size_t>(0, it->second.size() - 1)(rng_)];
  Reply r = api_.call("PUT", "/v1/nodes/" + node + "/states/power", json{{"target", "on"}}, t.token);
  // 404 when the node left the tenant since the log was read.
  count("tenant:power", r, {202, 404, 409});
}

void Workload::repair_pool() {
  for (const WorldNode* n : world_.with_role(NodeRole::kPool)) {
    const json* s = sampled(n->id);
    if (s == nullptr || !(*s)["tenant"].is_null() || !(*s)["allocation"].is_null() || !(*s)["reservation"].is_null())
      continue;
    const std::string state = str((*s)["provision_state"]);
    std::string verb;
    if (state == "manageable") verb = "provide";
    else if (state == "deploy_failed" || state == "active") verb = "undeploy";
    else if (state == "enroll" || state == "inspect_failed" || state == "clean_failed" || state == "quarantined")
      verb = "manage";
    if (verb.empty()) continue;
    Reply r = api_.call("PUT", "/v1/nodes/" + n->id + "/states/provision", json{{"target", verb}}, world_.admin_token);
    count("repair:" + verb, r, {202, 409});
  }
}

int Workload::release_everything() {
  Reply r = api_.get("/v1/allocations", world_.admin_token);
  if (!r.reached || r.status != 200) return -1;
  int asked = 0;
  for (const json& a : r.body.value("allocations", json::array())) {
    const std::string state = str(a["state"]);
    if (state == "released" || state == "releasing") continue;
    Reply d = api_.call("DELETE", "/v1/allocations/" + str(a["id"]), nullptr, world_.admin_token);
    count("allocation:release (end)", d, {202});
    ++asked;
  }
  live_.clear();
  return asked;
}

json Workload::figures() const { return counts_; }

}  // namespace kiln::soak
