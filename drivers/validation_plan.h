#pragma once
// Which validation plan a node runs (docs/validation.md): `quick` before a
// node is handed to a tenant, `full` as burn-in after cleaning (and on demand
// when an operator asks for either). The plan names are the agent's wire
// names and the profile's `plans.quick` / `plans.full` keys, so to_string is
// what every boundary (agent command, report, API) writes.

#include <optional>
#include <string_view>

namespace kiln {

enum class ValidationPlan { kQuick, kFull };

// Every plan, in the order profiles and documents list them.
inline constexpr ValidationPlan kValidationPlans[] = {ValidationPlan::kQuick, ValidationPlan::kFull};

constexpr std::string_view to_string(ValidationPlan p) { return p == ValidationPlan::kFull ? "full" : "quick"; }

// "quick" or "full"; nullopt for anything else.
constexpr std::optional<ValidationPlan> parse_validation_plan(std::string_view s) {
  if (s == "quick") return ValidationPlan::kQuick;
  if (s == "full") return ValidationPlan::kFull;
  return std::nullopt;
}

}  // namespace kiln
