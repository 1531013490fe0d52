#include "controller/api/api.h"

#include <cassert>
#include <chrono>

#include "common/json_text.h"
#include "controller/api/anonymous_log.h"
#include "controller/api/auth.h"
#include "controller/api/boot_routes.h"
#include "controller/api/conditional_get.h"
#include "controller/api/portal.h"
#include "controller/api/problem.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/api/validation_routes.h"
#include "controller/api/virtual_nodes.h"

namespace kiln {

Status api::check_needs(const ApiDeps& deps, Needs needs) {
  switch (needs) {
    case Needs::kNothing: return ok_status();
    case Needs::kAgentBroker:
      if (deps.agent_broker == nullptr) return Error(Code::kUnavailable, "the agent broker is not running in this kilnd");
      return ok_status();
    case Needs::kAllocations:
      if (deps.allocations == nullptr) return Error(Code::kUnavailable, "allocations are not enabled in this kilnd");
      return ok_status();
    case Needs::kHosts:
      if (deps.hosts == nullptr) return Error(Code::kUnavailable, "this kilnd has no hypervisor support");
      return ok_status();
    case Needs::kImageDirs:
      if (deps.image_dirs == nullptr) return Error(Code::kUnavailable, "this kilnd has no image directory");
      return ok_status();
  }
  return Error(Code::kInternal, "unknown route need");
}

using namespace kiln::api;

namespace {

bool is_mutating(bhttp::verb v) {
  return v == bhttp::verb::post || v == bhttp::verb::put || v == bhttp::verb::patch ||
         v == bhttp::verb::delete_;
}

using RequestState = RequestRecord;

// Whether `path` is `prefix` itself or below it.
bool under_prefix(std::string_view path, std::string_view prefix) {
  return path.starts_with(prefix) && (path.size() == prefix.size() || path[prefix.size()] == '/');
}

struct Mount {
  std::string prefix;
  Api::MountedHandler handler;
};

}  // namespace

struct Api::Impl {
  explicit Impl(ApiDeps d) : ctx(std::move(d)) {}

  asio::awaitable<Result<http::Reply>> dispatch(http::Request& req, const http::RequestInfo& info,
                                                const Logger& log, RequestState& st);
  // The store's write generation for this request, read once, before its
  // token lookup and its route read the store (read_cache.h): SQLite's
  // counter for every request (free); PostgreSQL's snapshot, one round
  // trip shared with the requests that asked at the same time
  // (generation_reads.h), only for a route the read cache keeps and a
  // request that carries credentials (elsewhere the round trip would only
  // add to the token read it might save). nullopt: nothing is taken from
  // memory or kept.
  asio::awaitable<std::optional<WriteGeneration>> read_database_generation();
  // A Caching::kUntilWrite route: its kept answer while the store has not
  // been written since `generation` was read, else the handler's (kept when
  // a 200).
  asio::awaitable<Result<http::Reply>> answer_from_cache(const RouteDef& def, Call& call,
                                                         const std::optional<WriteGeneration>& generation);

  ApiContext ctx;
  RouteTable table;
  AnonymousRejectLog anonymous_log;
  std::vector<Mount> mounts;
};

asio::awaitable<Result<http::Reply>> Api::Impl::dispatch(http::Request& req,
                                                         const http::RequestInfo& info,
                                                         const Logger& log, RequestState& st) {
  auto [path, query_text] = split_target(req.target());
  st.path = to_valid_utf8(path);
  // A mounted API answers for everything below its prefix, in its own error
  // format, before the v1 router or the portal can.
  for (const Mount& mount : mounts) {
    if (!under_prefix(path, mount.prefix)) continue;
    st.route = mount.prefix;
    http::Reply mounted = co_await mount.handler(req, info, log, st);
    co_return mounted;
  }
  // Strings from the request line end up in problem bodies, logs and the
  // audit table: refuse bytes that are not UTF-8, raw or percent-encoded,
  // before anything echoes them.
  std::optional<std::string> decoded = percent_decode(path, false);
  if (!is_valid_utf8(path) || (decoded && !is_valid_utf8(*decoded)))
    co_return Error::invalid("path", "the request path is not valid UTF-8");
  RouteMatch m = table.router().match(req.method(), path);
  if (m.kind == RouteMatch::Kind::kNotFound && ctx.deps.portal != nullptr) {
    // Asked only when no route matched, so no file can shadow an API route.
    if (std::optional<http::Response> file = ctx.deps.portal->serve(req)) {
      st.route = "portal";
      http::Reply reply;
      reply.response = std::move(*file);
      co_return reply;
    }
  }
  if (m.kind == RouteMatch::Kind::kNotFound)
    co_return Error(Code::kNotFound, "no such resource: " + st.path);
  if (m.kind == RouteMatch::Kind::kMethodNotAllowed) {
    for (bhttp::verb v : m.allowed) st.allow.append(st.allow.empty() ? "" : ", ").append(bhttp::to_string(v));
    co_return Error(Code::kMethodNotAllowed, std::string(req.method_string()) + " is not allowed on " +
                                                 st.path + "; allowed: " + st.allow);
  }
  st.route = *m.pattern;
  const RouteDef& def = table.def(m.index);

  // One write generation per request, shared by its token lookup and its
  // route (see read_database_generation).
  std::optional<WriteGeneration> generation;
  if (std::optional<uint64_t> counter = ctx.deps.store.write_generation())
    generation.emplace(WriteGeneration{*counter, {}});
  else if (def.caching == Caching::kUntilWrite && ctx.deps.store.has_database_generation() &&
           (def.access == Access::kPublic || req.find(bhttp::field::authorization) != req.end()))
    generation = co_await read_database_generation();

  Principal principal;  // stays anonymous on public routes
  if (def.access != Access::kPublic) {
    Result<Principal> p = co_await authenticate(req, ctx.deps.store, ctx.deps.db, ctx.deps.clock,
                                                TokenMemory{&ctx.tokens, generation ? &*generation : nullptr});
    if (!p) co_return p.error();
    principal = *p;
    st.principal = principal;
  }
  Result<Query> query = Query::parse(query_text);
  if (!query) co_return query.error();
  if (Status known = query->check_known(def.query); !known) co_return known.error();

  Call call{req, info, m.params, *query, principal, log, {}};
  if (const Membership* ms = ctx.deps.conductor.membership(); ms != nullptr) call.ring = ms->view();
  if (!role_allowed(def.access, principal)) {
    // A tenant must not learn that someone else's node exists: refuse with
    // 404 unless the node is its own, and only then with 403.
    if (principal.role == Role::kTenant && def.pattern.starts_with("/v1/nodes/{id}")) {
      Result<Node> node = co_await load_visible_node(ctx, call, call.param("id"));
      st.node_id = call.node_id;
      if (!node) co_return node.error();
    }
    co_return Error(Code::kPermissionDenied, "role " + std::string(to_string(principal.role)) +
                                                 " may not " + std::string(req.method_string()) +
                                                 " " + def.pattern);
  }
  if (Status present = check_needs(ctx.deps, def.needs); !present) co_return present.error();
  if (def.caching == Caching::kUntilWrite) {
    Result<http::Reply> kept = co_await answer_from_cache(def, call, generation);
    st.node_id = call.node_id;
    co_return kept;
  }
  Result<http::Reply> reply = co_await def.fn(call);
  st.node_id = call.node_id;
  co_return reply;
}

asio::awaitable<std::optional<WriteGeneration>> Api::Impl::read_database_generation() {
  Result<WriteGeneration> read = co_await ctx.generations.read();
  // A failure is the database's: the handler's own read meets it and answers
  // for it, so here it only means that nothing is kept.
  if (!read) co_return std::nullopt;
  co_return std::move(*read);
}

asio::awaitable<Result<http::Reply>> Api::Impl::answer_from_cache(const RouteDef& def, Call& call,
                                                                  const std::optional<WriteGeneration>& generation) {
  // `generation` was read before anything of this request read the store:
  // see read_cache.h.
  std::string key;
  if (generation) {
    key = ReadCache::key(call.req, call.info, call.principal);
    if (std::optional<ReadCache::Kept> kept = ctx.read_cache.find(key, *generation, call.ring.get())) {
      http::Reply reply;
      reply.response = *kept->head;
      reply.shared_body = std::move(kept->body);
      answer_conditionally(call.req, reply);
      co_return reply;
    }
  }
  Result<http::Reply> reply = co_await def.fn(call);
  if (!reply || reply->stream || reply->file || reply->response.result() != bhttp::status::ok) co_return reply;
  give_etag(reply->response);
  if (generation) ctx.read_cache.put(std::move(key), *generation, call.ring, reply->response);
  answer_conditionally(call.req, *reply);
  co_return reply;
}

Api::Api(ApiDeps deps) : impl_(std::make_unique<Impl>(std::move(deps))) {
  ApiContext& ctx = impl_->ctx;
  RouteTable& t = impl_->table;
  add_meta_routes(t, ctx);
  add_node_routes(t, ctx);
  add_node_verb_routes(t, ctx);
  add_port_routes(t, ctx);
  add_event_routes(t, ctx);
  add_token_routes(t, ctx);
  add_tenant_routes(t, ctx);
  add_allocation_routes(t, ctx);
  add_audit_routes(t, ctx);
  add_agent_routes(t, ctx);
  add_phone_home_routes(t, ctx);
  add_image_routes(t, ctx);
  add_boot_routes(t, ctx);
  add_profile_routes(t, ctx);
  add_validation_routes(t, ctx);
  add_availability_routes(t, ctx);
  add_host_routes(t, ctx);
  add_conductor_routes(t, ctx);
  EventFeed* feed = &ctx.feed;
  std::function<void(int64_t)> also = ctx.deps.on_events;
  ctx.deps.store.set_event_listener([feed, also](int64_t seq) {
    feed->notify(seq);
    if (also) also(seq);
  });
  if (Result<int64_t> last = ctx.deps.store.last_event_seq()) feed->notify(*last);
}

Api::~Api() {
  impl_->ctx.deps.store.set_event_listener([](int64_t) {});
  impl_->ctx.feed.shutdown();
}

asio::awaitable<http::Reply> Api::handle(http::Request& req, const http::RequestInfo& info) {
  ApiContext& ctx = impl_->ctx;
  auto started = std::chrono::steady_clock::now();
  Logger log = ctx.deps.log.with("request_id", info.request_id);
  RequestState st;
  Result<http::Reply> result = Error(Code::kInternal, "internal error");
  try {
    result = co_await impl_->dispatch(req, info, log, st);
  } catch (const std::exception& e) {
    log.error("route threw", {{"route", st.route}, {"what", e.what()}});
    result = Error(Code::kInternal, "internal error");
  }

  http::Reply reply;
  if (result) {
    reply = std::move(*result);
  } else {
    const Error& err = result.error();
    reply.response = problem_response(err, req.version(), req.keep_alive());
    if (!st.allow.empty()) reply.response.set(bhttp::field::allow, st.allow);
    if (err.code == Code::kUnauthenticated && req.find(bhttp::field::authorization) != req.end())
      reply.response.set(bhttp::field::www_authenticate, "Bearer error=\"invalid_token\"");
  }
  const int status = static_cast<int>(reply.response.result_int());

  // A request nobody vouched for (no valid token, and not an accepted agent
  // call on a public route) that was refused (4xx) is noise anyone can make:
  // it is counted and summarised in a rate-limited log line, not written to
  // the audit table or logged one line each, so it cannot grow either. A 5xx
  // is not a refusal (/readyz answering 503 while the store is not ready is
  // the probe's answer): not counted as one, logged like any failure, and
  // still kept out of the audit table.
  const bool anonymous_failure = !st.principal && status >= 400;
  if (anonymous_failure && status < 500) {
    ctx.metrics.count_rejected_anonymous();
    impl_->anonymous_log.note(log, st.route, status);
  } else if (!result) {
    const Error& err = result.error();
    log.log(status >= 500 ? LogLevel::kWarn : LogLevel::kInfo, "request failed",
            {{"method", std::string(req.method_string())},
             {"path", st.path},
             {"route", st.route},
             {"status", std::to_string(status)},
             {"code", code_name(err.code)},
             {"detail", err.message}});
  }

  // Heartbeats are an agent saying "still here" every few seconds, not
  // something anyone did: they stay out of the audit log.
  if (is_mutating(req.method()) && !anonymous_failure && st.route != "/v1/agent/heartbeat") {
    AuditRecord a;
    a.ts = ctx.deps.clock.now_ms();
    if (st.principal) {
      a.actor = st.principal->token_id;
      a.actor_name = st.principal->name;
      a.role = std::string(to_string(st.principal->role));
    }
    a.method = std::string(req.method_string());
    a.path = st.path;
    a.request_id = info.request_id;
    a.node_id = st.node_id;
    a.status = status;
    Status s = co_await ctx.deps.db.run([&] { return ctx.deps.store.append_audit(a); });
    if (!s) log.error("audit write failed", {{"error", s.error().message}});
  }

  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ctx.metrics.observe(req.method(), st.route, seconds);
  co_return reply;
}

http::Response Api::error_response(int status, std::string_view detail) {
  Error err(code_for_status(status), std::string(detail));
  impl_->ctx.deps.log.info("transport error reply", {{"status", std::to_string(status)},
                                                     {"detail", std::string(detail)}});
  return problem_response(err, 11, false, status);
}

std::optional<uint64_t> Api::streamed_body(const http::RequestHeader& header) const {
  const std::string_view target = header.target();
  const std::string_view path = target.substr(0, target.find('?'));
  RouteMatch m = impl_->table.router().match(header.method(), path);
  if (m.kind != RouteMatch::Kind::kFound) return std::nullopt;
  const uint64_t max = impl_->table.def(m.index).streamed_body_max;
  if (max == 0) return std::nullopt;
  return max;
}

void Api::mount(std::string prefix, MountedHandler handler) {
  assert(prefix.size() > 1 && prefix.front() == '/' && prefix.back() != '/');
  impl_->mounts.push_back(Mount{std::move(prefix), std::move(handler)});
}

ApiContext& Api::context() { return impl_->ctx; }

void Api::shutdown() { impl_->ctx.feed.shutdown(); }

void Api::set_ready(bool ready) { impl_->ctx.ready.store(ready); }

std::vector<std::pair<std::string, std::string>> Api::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Router::Entry& e : impl_->table.router().routes())
    out.emplace_back(std::string(bhttp::to_string(e.method)), e.pattern);
  return out;
}

}  // namespace kiln
