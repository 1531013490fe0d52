#pragma once
// Writes a node's JSON straight into a string, without building an
// nlohmann::json tree first. The list route serves up to 1,000 nodes per
// request; building a tree of std::map objects per node and then serialising
// it was most of kilnd's CPU time under load (bench/api_bench.py). The output
// is the same document node_json() builds (a test checks it field by field,
// for every role and detail level); keys come in a fixed order rather than
// sorted.

#include <set>
#include <string>

#include "controller/api/auth.h"
#include "controller/api/node_view.h"
#include "controller/model/node.h"

namespace kiln::api {

// Appends the node as `role` sees it; `fields` empty = every field, else only
// those (plus id), like select_fields().
// `ring`: as node_json().
void append_node_json(std::string& out, const Node& node, Role role, NodeDetail detail,
                      const std::set<std::string>& fields, const RingView* ring = nullptr);

// Appends `s` as a JSON string literal (quoted, escaped).
void append_json_string(std::string& out, std::string_view s);

}  // namespace kiln::api
