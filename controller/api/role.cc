#include "controller/api/role.h"

namespace kiln::api {

std::optional<Role> parse_role(std::string_view s) {
  if (s == "admin") return Role::kAdmin;
  if (s == "operator") return Role::kOperator;
  if (s == "tenant") return Role::kTenant;
  return std::nullopt;
}

std::string_view to_string(Role r) {
  switch (r) {
    case Role::kAdmin: return "admin";
    case Role::kOperator: return "operator";
    case Role::kTenant: return "tenant";
  }
  return "tenant";
}

}  // namespace kiln::api
