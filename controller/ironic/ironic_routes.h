#pragma once
// Internal to kiln_ironic: the contract between the frame (ironic_api.cc)
// and the files that add Ironic routes (ironic_nodes_routes.cc,
// ironic_ports_routes.cc, ironic_drivers_routes.cc,
// ironic_provision_routes.cc).
//
// How to add a route: in your file, define the add_ironic_*_routes()
// declared below and call t.add({verb, pattern, access, query, fn, ...}) per
// route. Patterns are relative to the prefix ("/v1/nodes/{node_ident}"), in
// api::Router's template syntax; {node_ident} is a node's UUID or name.
//
// What the frame does before your fn runs:
//   - negotiates the microversion (IronicCall::version; 406 outside the range)
//     and refuses a route whose min_version is above it with 404, as Ironic
//     hides what a version does not have;
//   - authenticates (ironic_auth.h) unless access is kPublic; roles as /v1
//     (api::Access): a caller whose role the route's access refuses gets 403,
//     except a tenant on a route with node_param, which gets 404 unless the
//     node is its own (another tenant's node must look absent, as on /v1);
//   - parses the query string and refuses parameters not listed in `query`
//     (400 naming the parameter).
// What it does with your result:
//   - a Reply is sent as is, plus the version headers (set them nowhere else);
//   - an Error becomes Ironic's error body (ironic_error.h): Code -> status
//     by ironic_status(), faultstring = Error::message, so put the field and
//     Kiln's reason in the message (Error::invalid("/x", "why") does);
//   - set call.base.node_id (load_visible_node does) so the audit record
//     names the node.
// Replies: use ironic_json_reply() below (Content-Type application/json);
// statuses as gophercloud accepts them: 200 GET/PATCH, 201 POST create, 202
// provision/power/maintenance, 204 DELETE (api::empty_reply).
//
// Threading: fns run on the I/O threads as v1 routes do; store calls go
// through ctx.deps.db. The table is built once at start-up.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/http/server.h"
#include "common/result.h"
#include "controller/api/route_table.h"
#include "controller/ironic/ironic_version.h"

namespace kiln::ironic {

namespace bhttp = boost::beast::http;

// One request as an Ironic route sees it.
struct IronicCall {
  // The v1 view of the request: req, info, params, query, principal, log and
  // node_id, so v1 helpers (api::load_visible_node, api::event_draft) apply.
  api::Call& base;
  ApiVersion version;
  // The API's absolute URL without a trailing slash
  // ("https://kiln.example:8080/ironic"), for `links` and `next`.
  std::string endpoint;
  // The request's path as the route saw it, always under /v1 ("/ironic/v1/
  // nodes" also for a request to "/ironic/nodes"), without the query: what
  // a list's absolute `next` names, as Ironic's does.
  std::string path;

  const std::string& param(std::string_view name) const { return base.param(name); }
  const api::Query& query() const { return base.query; }
  const api::Principal& principal() const { return base.principal; }
  http::Request& req() const { return base.req; }
};

using IronicRouteFn = std::function<asio::awaitable<Result<http::Reply>>(IronicCall&)>;

struct IronicRouteDef {
  bhttp::verb method;
  std::string pattern;  // relative to the prefix, e.g. "/v1/nodes/{node_ident}"
  api::Access access;
  std::vector<std::string> query;  // accepted query parameters; others are 400
  IronicRouteFn fn;
  // The path parameter naming a node (for the tenant 404 rule above); empty
  // when the route is not about one node.
  std::string node_param;
  // The first version that has this route; older ones get 404.
  ApiVersion min_version = kMinVersion;
};

class IronicRouteTable {
 public:
  void add(IronicRouteDef def) {
    router_.add(def.method, def.pattern);
    defs_.push_back(std::move(def));
  }
  const api::Router& router() const { return router_; }
  const IronicRouteDef& def(std::size_t i) const { return defs_[i]; }

 private:
  api::Router router_;
  std::vector<IronicRouteDef> defs_;
};

// A 2xx JSON reply (Content-Type application/json, Cache-Control no-store).
http::Reply ironic_json_reply(const IronicCall& call, bhttp::status status, const nlohmann::json& body);

// An error reply with a status no Code maps to (406 for a field or verb
// newer than the request's version), returned as a successful Result so the
// frame sends it as is (with the version headers).
http::Reply ironic_error_reply(const IronicCall& call, int status, std::string_view faultstring);

// Registration, one per file. ironic_api.cc calls each once.
void add_ironic_node_routes(IronicRouteTable& t, api::ApiContext& ctx);       // ironic_nodes_routes.cc
void add_ironic_port_routes(IronicRouteTable& t, api::ApiContext& ctx);       // ironic_ports_routes.cc
void add_ironic_driver_routes(IronicRouteTable& t, api::ApiContext& ctx);     // ironic_drivers_routes.cc
// PUT /v1/nodes/{node_ident}/states/provision, .../states/power,
// .../maintenance (PUT/DELETE), GET .../states, GET .../validate: the
// node lifecycle (ironic_provision_routes.cc, with ironic_states.h).
void add_ironic_provision_routes(IronicRouteTable& t, api::ApiContext& ctx);

}  // namespace kiln::ironic
