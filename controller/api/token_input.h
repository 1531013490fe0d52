#pragma once
// The body of POST /v1/tokens, read and checked (pure; fuzzed by fuzz/api_bodies).

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/api/role.h"

namespace kiln::api {

struct TokenInput {
  std::string name;    // 1-255 characters
  Role role = Role::kTenant;
  std::string tenant;  // non-empty exactly when role is tenant
};

// kInvalidArgument listing every bad field by JSON pointer (/name, /role,
// /tenant, unknown fields). Whether the tenant exists is the caller's check.
Result<TokenInput> parse_token_create(const nlohmann::json& body);

}  // namespace kiln::api
