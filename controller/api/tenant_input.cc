#include "controller/api/tenant_input.h"

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "controller/api/json_input.h"
#include "controller/model/states.h"

namespace kiln::api {

using nlohmann::json;

bool is_resource_name(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(i > 0 && (c == '-' || c == '_'))) return false;
  }
  return true;
}

namespace {

void check_display_name(const std::optional<std::string>& d, std::vector<FieldError>& errors) {
  if (d && d->size() > 255) errors.push_back({"/display_name", "must be at most 255 characters"});
}

// Reads `quotas` (an array) into `out`, recording errors under /quotas/N.
void read_quotas(const json& arr, std::vector<TenantQuota>& out, std::vector<FieldError>& errors) {
  if (!arr.is_array()) {
    errors.push_back({"/quotas", "must be an array"});
    return;
  }
  if (arr.size() > 1000) {
    errors.push_back({"/quotas", "must have at most 1000 entries"});
    return;
  }
  std::set<std::pair<std::string, NodeKind>> seen;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string at = "/quotas/" + std::to_string(i);
    ObjectReader q(arr[i], at, errors);
    std::optional<std::string> profile = q.string("profile", true);
    std::optional<std::string> kind = q.string("kind", true);
    std::optional<int64_t> max_nodes = q.integer("max_nodes");
    if (q.is_object() && !max_nodes && !(arr[i].contains("max_nodes") && !arr[i]["max_nodes"].is_null()))
      errors.push_back({at + "/max_nodes", "is required"});
    q.finish();
    if (!q.is_object()) continue;
    if (profile && (profile->empty() || profile->size() > 128))
      errors.push_back({at + "/profile", "must be 1-128 characters"});
    std::optional<NodeKind> parsed_kind = kind ? parse_node_kind(*kind) : std::nullopt;
    if (kind && !parsed_kind) errors.push_back({at + "/kind", "must be baremetal or virtual"});
    if (max_nodes && (*max_nodes < 0 || *max_nodes > kMaxQuotaNodes))
      errors.push_back({at + "/max_nodes", "must be an integer from 0 to " + std::to_string(kMaxQuotaNodes)});
    if (profile && parsed_kind && max_nodes) {
      if (!seen.insert({*profile, *parsed_kind}).second)
        errors.push_back({at, "a second quota for " + *profile + " " + *kind});
      out.push_back(TenantQuota{*profile, *parsed_kind, *max_nodes});
    }
  }
}

}  // namespace

Result<Tenant> parse_tenant_create(const json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  std::optional<std::string> name = r.string("name", true);
  std::optional<std::string> display_name = r.string("display_name");
  Tenant t;
  if (const json* quotas = r.array("quotas")) read_quotas(*quotas, t.quotas, errors);
  r.finish();
  if (name && !is_resource_name(*name))
    errors.push_back({"/name", "must be 1-63 characters of lowercase letters, digits, '-' and '_', "
                               "starting with a letter or digit"});
  check_display_name(display_name, errors);
  if (!errors.empty()) return invalid_fields(std::move(errors));
  t.name = *name;
  t.display_name = display_name.value_or("");
  return t;
}

Result<Tenant> apply_tenant_patch(const Tenant& current, const json& patch) {
  std::vector<FieldError> errors;
  if (!patch.is_object()) return invalid_fields({{"", "must be a JSON object (a JSON Merge Patch)"}});
  ObjectReader r(patch, "", errors);
  Tenant next = current;
  if (patch.contains("name")) {
    r.mark("name");
    if (patch["name"] != current.name) errors.push_back({"/name", "cannot be changed"});
  }
  for (const char* server_field : {"created_at", "updated_at", "version"}) r.mark(server_field);
  if (patch.contains("display_name")) {
    if (patch["display_name"].is_null()) {
      r.mark("display_name");
      next.display_name.clear();
    } else if (std::optional<std::string> d = r.string("display_name")) {
      check_display_name(d, errors);
      next.display_name = *d;
    }
  }
  if (patch.contains("quotas")) {
    r.mark("quotas");
    next.quotas.clear();
    if (!patch["quotas"].is_null()) read_quotas(patch["quotas"], next.quotas, errors);
  }
  r.finish();
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return next;
}

}  // namespace kiln::api
