#include "controller/api/token_input.h"

#include <optional>
#include <vector>

#include "controller/api/json_input.h"

namespace kiln::api {

Result<TokenInput> parse_token_create(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  std::optional<std::string> name = r.string("name", true);
  std::optional<std::string> role_name = r.string("role", true);
  std::optional<std::string> tenant = r.string("tenant");
  r.finish();
  if (name && (name->empty() || name->size() > 255)) errors.push_back({"/name", "must be 1-255 characters"});
  std::optional<Role> role;
  if (role_name) {
    role = parse_role(*role_name);
    if (!role) errors.push_back({"/role", "must be one of admin, operator, tenant"});
  }
  if (role == Role::kTenant && (!tenant || tenant->empty()))
    errors.push_back({"/tenant", "required for role tenant"});
  if (role && role != Role::kTenant && tenant)
    errors.push_back({"/tenant", "only allowed for role tenant"});
  if (tenant && tenant->size() > 255) errors.push_back({"/tenant", "must be at most 255 characters"});
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return TokenInput{*name, *role, tenant.value_or("")};
}

}  // namespace kiln::api
