#pragma once
// The bodies of POST /v1/tenants and PATCH /v1/tenants/{name}, read and
// checked (pure; fuzzed by fuzz/api_bodies). Whether each quota's profile
// exists is the caller's check (it needs the store).

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/model/tenant.h"

namespace kiln::api {

// Highest max_nodes a quota may state: far past any fleet, low enough that
// sums of quotas cannot overflow.
inline constexpr int64_t kMaxQuotaNodes = 1'000'000;

// Tenant and allocation names travel in URLs, tokens, events and log lines:
// 1-63 of [a-z0-9_-], starting with a letter or digit (a DNS label's
// alphabet) keeps them unambiguous everywhere.
bool is_resource_name(const std::string& s);

// {"name", "display_name"?, "quotas"?: [{"profile", "kind", "max_nodes"}]}.
// kInvalidArgument listing every bad field by JSON pointer (/name,
// /display_name, /quotas/N/profile, /quotas/N/kind, /quotas/N/max_nodes, a
// second quota for the same profile and kind at /quotas/N, unknown fields).
// The tenant has no timestamps or version yet.
Result<Tenant> parse_tenant_create(const nlohmann::json& body);

// Applies a JSON Merge Patch to `current`: display_name (null clears it) and
// quotas (the whole list; null empties it). The name cannot change.
// kInvalidArgument as above.
Result<Tenant> apply_tenant_patch(const Tenant& current, const nlohmann::json& patch);

}  // namespace kiln::api
