#pragma once
// A Kiln node as Ironic's clients read it (GET /v1/nodes/{id}, the lists).
//
// Types are the ones the clients decode into (gophercloud's Node struct,
// openstacksdk's Node resource): booleans are JSON booleans, dict fields are
// objects ({} when empty, never null), optional strings are null when unset,
// timestamps are RFC 3339 in UTC ("2026-11-27T16:48:02.690000+00:00") or
// null, and every node carries `links` (self and bookmark). State names come
// from ironic_states.h (the lifecycle table), driver_info from
// ironic_driver_info.h (passwords "******").
//
// Fields follow the request's microversion as Ironic's VERSIONED_FIELDS do: a
// field newer than the version is not returned, and asking for it in
// ?fields= is 406. Without detail (GET /v1/nodes) a node shows uuid, name,
// instance_uuid, power_state, provision_state, maintenance and links.
//
// Pure functions; any thread.

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/ironic/ironic_version.h"
#include "controller/model/node.h"

namespace kiln::ironic {

struct NodeViewOptions {
  ApiVersion version;
  std::string endpoint;  // the API's absolute URL, for links
  bool detail = true;
  // Only these fields (plus uuid and links); nullopt = all the detail level has.
  std::optional<std::set<std::string>> fields;
};

nlohmann::json node_view(const Node& node, const NodeViewOptions& options);

// Why a ?fields= value is refused.
struct FieldsRefusal {
  int status = 400;  // 400 unknown field, 406 a field newer than the version
  std::string message;
};

// Parses ?fields=a,b,c for `version`: each must be a node field Ironic knows
// and the version has.
std::variant<std::set<std::string>, FieldsRefusal> parse_node_fields(std::string_view value, ApiVersion version);

// Milliseconds since the epoch as Ironic writes a timestamp; null for 0.
nlohmann::json ironic_timestamp(int64_t ms);

// The Ironic document's member `key` when it is a string, else null.
nlohmann::json doc_string(const Node& node, std::string_view key);

// The instance a node is associated with (Ironic's instance_uuid): the one a
// client set, else Kiln's allocation holding it; null when neither.
nlohmann::json instance_uuid_of(const Node& node);

}  // namespace kiln::ironic
