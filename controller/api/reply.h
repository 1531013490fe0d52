#pragma once
// Building successful replies, and node lookups shared by the node routes.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/http/server.h"
#include "common/result.h"
#include "controller/api/route_table.h"
#include "controller/model/node.h"

namespace kiln::api {

// A JSON reply (Content-Type application/json, Cache-Control no-store).
http::Reply json_reply(const http::Request& req, bhttp::status status, const nlohmann::json& body);
// A JSON reply whose body is already serialised.
http::Reply raw_json_reply(const http::Request& req, bhttp::status status, std::string body);
// 204 No Content.
http::Reply empty_reply(const http::Request& req, bhttp::status status = bhttp::status::no_content);
// A node reply as `role` sees it, with ETag (and Location when `location`).
http::Reply node_reply(const Call& call, bhttp::status status, const Node& node,
                       bool location = false);

// Reads the node `id_or_name` as the caller may see it: kNotFound ("no such
// node") both when absent and when it belongs to another tenant (or to none,
// for a tenant). Records its id in call.node_id.
asio::awaitable<Result<Node>> load_visible_node(ApiContext& ctx, Call& call,
                                                std::string_view id_or_name);

// Whether `node` may be deleted now (DELETE /v1/nodes/{id}, and the Ironic
// API's): nothing runs on it and no tenant holds it. kConflict saying why.
Status check_deletable(const Node& node);

// Parses If-Match: nullopt when absent or "*"; a version for "N" or W/"N";
// 400 field "If-Match" otherwise.
Result<std::optional<int64_t>> parse_if_match(const http::Request& req);

// Fills the common event fields (actor, request id, owner).
EventDraft event_draft(const Call& call, std::string type, const Node& node);

// Sets (`on`, with `reason`) or clears maintenance on `node` in one write
// with its event (node.maintenance_set / node.maintenance_cleared); clearing
// also clears `fault`, since an operator has looked at the node. `version`:
// the If-Match condition, if any. Both /v1 and the Ironic API's maintenance
// routes write through it (node_verbs_routes.cc). Errors: the store's
// (kNotFound, kPreconditionFailed for a stale version).
asio::awaitable<Result<Node>> write_maintenance(ApiContext& ctx, const Call& call, const Node& node, bool on,
                                                std::string reason, std::optional<int64_t> version);

}  // namespace kiln::api
