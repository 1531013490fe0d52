#pragma once
// The three roles a token carries (auth.h says what each may do). Pure.

#include <optional>
#include <string_view>

namespace kiln::api {

enum class Role { kAdmin, kOperator, kTenant };

// "admin", "operator", "tenant"; nullopt for anything else.
std::optional<Role> parse_role(std::string_view s);
std::string_view to_string(Role r);

}  // namespace kiln::api
