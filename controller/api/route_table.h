#pragma once
// Internal to kiln_api: what a route handler gets (Call), what it shares with
// the other routes (ApiContext), and how routes are declared (RouteDef).
// Each *_routes.cc adds its resource's routes with one add_*_routes() call.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"
#include "common/result.h"
#include "controller/api/api.h"
#include "controller/api/auth.h"
#include "controller/api/event_feed.h"
#include "controller/api/metrics.h"
#include "controller/api/query.h"
#include "controller/api/generation_reads.h"
#include "controller/api/read_cache.h"
#include "controller/api/router.h"
#include "controller/conductor/membership.h"

namespace kiln::api {

// Who may call a route. Tenant restrictions finer than this (own nodes only)
// are applied by the route itself.
enum class Access {
  kPublic,  // no token needed
  kAdmin,   // admin only
  kStaff,   // admin or operator
  kAnyRole, // any valid token; tenants are confined to their own resources
};

// Whether `p`'s role may call a route declared with `access`: the one rule
// for every API kilnd serves (/v1 and /ironic).
inline bool role_allowed(Access access, const Principal& p) {
  switch (access) {
    case Access::kPublic: return true;
    case Access::kAdmin: return p.is_admin();
    case Access::kStaff: return p.is_staff();
    case Access::kAnyRole: return true;
  }
  return false;
}

struct ApiContext {
  explicit ApiContext(ApiDeps d)
      : deps(std::move(d)), generations(deps.db, [this] { return deps.store.database_generation(); }) {}
  ApiDeps deps;
  EventFeed feed;
  RequestMetrics metrics;
  GenerationReads generations;  // PostgreSQL's generation, read for the read cache
  ReadCache read_cache;
  TokenCache tokens;
  std::atomic<bool> ready{false};
};

// What Api::handle() learns about one request while it is served, for the
// audit record, the metrics and the logs (a mounted API fills it too).
struct RequestRecord {
  std::string path;
  std::string route = "unmatched";  // the route template, as metrics name it
  std::string allow;                // for 405
  std::optional<Principal> principal;
  std::string node_id;
};

// One request as a route sees it.
struct Call {
  http::Request& req;
  const http::RequestInfo& info;
  const PathParams& params;
  const Query& query;
  const Principal& principal;  // an anonymous admin-less principal on public routes
  Logger log;
  std::string node_id;  // set by node routes once known, for the audit record
  // The conductors' ring as this instance saw it when the request came in
  // (node views show each node's owner); null without a membership.
  std::shared_ptr<const RingView> ring;

  // The path parameter `name` ({id} in the route's template). A name the
  // template lacks (a handler's bug) reads as empty, which every handler
  // answers as a missing resource, rather than reading past the map.
  const std::string& param(std::string_view name) const {
    static const std::string kNone;
    const auto it = params.find(name);
    return it == params.end() ? kNone : it->second;
  }
  // The Actor the conductor records in events.
  Actor actor() const {
    return Actor{principal.token_id, principal.name, std::string(to_string(principal.role)),
                 info.request_id};
  }
};

using RouteFn = std::function<asio::awaitable<Result<http::Reply>>(Call&)>;

// A service of ApiDeps a route cannot run without. kilnd may be started
// without it (tests, a controller with no hypervisors); then the route
// answers 503 naming it, after authentication and before the handler runs,
// so a handler dereferences the service it declared without checking.
enum class Needs {
  kNothing,
  kAgentBroker,   // ApiDeps::agent_broker
  kAllocations,   // ApiDeps::allocations
  kHosts,         // ApiDeps::hosts
  kImageDirs,     // ApiDeps::image_dirs
};

// kUnavailable naming the service `needs` names when `deps` lacks it.
Status check_needs(const ApiDeps& deps, Needs needs);

// Whether a GET route's answers may be kept until the store's next write
// (read_cache.h): kUntilWrite only when the answer depends on nothing but
// what the store holds of nodes, ports, tokens and allocations, the caller's
// role and tenant, the target, the Host header and TLS, and the ring's
// members: never on the clock, on other tables or on anything else in
// memory. Such a route also answers If-None-Match (conditional_get.h).
enum class Caching { kNone, kUntilWrite };

struct RouteDef {
  bhttp::verb method;
  std::string pattern;
  Access access;
  std::vector<std::string> query;  // accepted query parameters; others are 400
  RouteFn fn;
  // 0: the server reads the body into req.body() (within --max-body-bytes).
  // Otherwise the body is streamed: the route reads up to this many bytes
  // itself from call.info.body (http::BodyReader), as they arrive.
  uint64_t streamed_body_max = 0;
  Needs needs = Needs::kNothing;
  Caching caching = Caching::kNone;
};

class RouteTable {
 public:
  void add(RouteDef def, Needs needs = Needs::kNothing, Caching caching = Caching::kNone) {
    std::size_t i = router_.add(def.method, def.pattern);
    (void)i;
    def.needs = needs;
    def.caching = caching;
    defs_.push_back(std::move(def));
  }
  const Router& router() const { return router_; }
  const RouteDef& def(std::size_t i) const { return defs_[i]; }

 private:
  Router router_;
  std::vector<RouteDef> defs_;
};

void add_meta_routes(RouteTable& t, ApiContext& ctx);
void add_conductor_routes(RouteTable& t, ApiContext& ctx);
void add_node_routes(RouteTable& t, ApiContext& ctx);
void add_node_verb_routes(RouteTable& t, ApiContext& ctx);
void add_port_routes(RouteTable& t, ApiContext& ctx);
void add_event_routes(RouteTable& t, ApiContext& ctx);
void add_token_routes(RouteTable& t, ApiContext& ctx);
void add_tenant_routes(RouteTable& t, ApiContext& ctx);
void add_allocation_routes(RouteTable& t, ApiContext& ctx);
void add_audit_routes(RouteTable& t, ApiContext& ctx);
void add_agent_routes(RouteTable& t, ApiContext& ctx);
void add_phone_home_routes(RouteTable& t, ApiContext& ctx);

}  // namespace kiln::api
