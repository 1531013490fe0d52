#pragma once
// RFC 6902 JSON Patch as Ironic's PATCH /v1/nodes/{id} takes it: an array of
// {"op": "add"|"replace"|"remove", "path": "/a/b", "value"?}, applied in
// order to a document (the node's editable fields, ironic_nodes_routes.cc).
// Ironic refuses the other RFC 6902 ops (test, move, copy), and so does
// this. Paths are JSON pointers (RFC 6901, "~1" is '/', "~0" is '~').
//
// Untrusted input, bounded: at most kMaxPatchOps operations, paths of at
// most kMaxPathDepth tokens. Every refusal is kInvalidArgument naming the
// operation ("/2/path: ...") without echoing values (a driver_info password
// may be one). Nothing is applied on failure (the caller's document is
// untouched).
//
// Pure; any thread. Also the fuzz target tests/fuzz/ironic_patch_fuzz.cc.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::ironic {

inline constexpr std::size_t kMaxPatchOps = 256;
inline constexpr std::size_t kMaxPathDepth = 32;

// Splits a JSON pointer into its unescaped tokens; an error for "" or a
// pointer not starting with '/', a bad escape, or one too deep.
Result<std::vector<std::string>> parse_pointer(std::string_view pointer);

// Applies `patch` to `doc` (all or nothing).
Status apply_json_patch(nlohmann::json& doc, const nlohmann::json& patch);

// The first token of each operation's path ("driver_info" for
// "/driver_info/redfish_address"); valid only after apply_json_patch
// accepted `patch`.
std::vector<std::string> patched_fields(const nlohmann::json& patch);

}  // namespace kiln::ironic
