#pragma once
// JSON Merge Patch (RFC 7396): a patch object's members replace the target's,
// null members delete, nested objects merge recursively, and any non-object
// patch replaces the target wholesale.

#include <nlohmann/json.hpp>

namespace kiln::api {

// Applies `patch` to `target` in place.
void apply_merge_patch(nlohmann::json& target, const nlohmann::json& patch);

}  // namespace kiln::api
