// /v1/agent/*: kiln-agent's side of the API (docs/agent-protocol.md).
//
// These routes are public as far as the operator/tenant token scheme goes:
// an agent holds no API token. Lookup is authorised by the node's one-time
// boot token (ramdisk) or its deploy secret (os), then by the node's state
// (a missing os secret is a 401 like a wrong one, not a 400); heartbeat and results
// check the agent's session bearer themselves, through the AgentBroker, before
// they read the body.
// Unknown body fields are ignored, so an agent newer than kilnd still talks
// to it; wrong types and missing fields are 400s naming the field.

#include "controller/agent/agent_broker.h"
#include "controller/api/agent_input.h"
#include "controller/api/json_input.h"
#include "controller/api/node_input.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"

namespace kiln::api {
namespace {

// The session bearer (kUnauthenticated when absent or not "Bearer <x>").
Result<std::string> agent_bearer(const http::Request& req) {
  auto it = req.find(bhttp::field::authorization);
  if (it == req.end()) return Error(Code::kUnauthenticated, "missing agent session (Authorization: Bearer)");
  std::string_view v = it->value();
  constexpr std::string_view kPrefix = "Bearer ";
  if (v.size() <= kPrefix.size() || v.substr(0, kPrefix.size()) != kPrefix)
    return Error(Code::kUnauthenticated, "Authorization must be \"Bearer <agent session>\"");
  return std::string(v.substr(kPrefix.size()));
}

// The bearer, once the broker knows it as a live session: a body from
// someone without one is never parsed, so its size and shape cost nothing.
// The broker checks the session again when it acts (it may end meanwhile).
asio::awaitable<Result<std::string>> checked_agent_bearer(ApiContext& ctx, const http::Request& req) {
  Result<std::string> bearer = agent_bearer(req);
  if (!bearer) co_return bearer.take_error();
  Result<Node> node = co_await ctx.deps.agent_broker->session_node(*bearer);
  if (!node) co_return node.take_error();
  co_return std::move(*bearer);
}

nlohmann::json lookup_json(const AgentLookupReply& r) {
  nlohmann::json name = r.node.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.node.name);
  return {{"node",
           {{"id", r.node.id},
            {"name", name},
            {"provision_state", std::string(to_string(r.node.provision_state))},
            {"provision_step", r.node.provision_step}}},
          {"session", r.session},
          {"heartbeat_interval_s", r.heartbeat_interval_s}};
}

nlohmann::json heartbeat_json(const AgentHeartbeatReply& r) {
  nlohmann::json command = nullptr;
  if (r.command) command = {{"id", r.command->id}, {"name", r.command->name}, {"args", r.command->args}};
  return {{"command", command}, {"heartbeat_interval_s", r.heartbeat_interval_s}};
}

// The field errors of a refused body, for its event ("" when the error
// names none: malformed JSON).
std::vector<FieldError> refusal_fields(const Error& e) {
  if (!e.fields.empty()) return e.fields;
  return {{"", e.message}};
}

// A session's body, read by `parse`. A body refused as bad input is refused
// whole (nothing of it is stored) and told to the session's node as an event.
template <typename T>
asio::awaitable<Result<T>> read_session_body(ApiContext& ctx, const Call& call, const std::string& session,
                                             const char* route, Result<T> (*parse)(const nlohmann::json&)) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  Result<T> parsed = body ? parse(*body) : Result<T>(body.take_error());
  if (parsed) co_return std::move(parsed);
  Error refused = parsed.take_error();
  if (refused.code == Code::kInvalidArgument)
    co_await ctx.deps.agent_broker->record_refused_input(session, route, refusal_fields(refused));
  co_return refused;
}

asio::awaitable<Result<http::Reply>> lookup(ApiContext& ctx, Call& call) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.take_error();
  Result<AgentLookup> req = parse_agent_lookup(*body);
  if (!req) {
    // Refused whole; the node hears of it only from a caller that holds its
    // credential (the broker checks).
    Error refused = req.take_error();
    Result<AgentLookup> credential = parse_agent_lookup_credential(*body);
    if (credential) co_await ctx.deps.agent_broker->record_refused_lookup(std::move(*credential), refusal_fields(refused));
    co_return refused;
  }
  AgentLookup request = std::move(*req);
  Result<AgentLookupReply> reply = co_await ctx.deps.agent_broker->lookup(request);
  if (!reply) co_return reply.take_error();
  call.node_id = reply->node.id;
  co_return json_reply(call.req, bhttp::status::ok, lookup_json(*reply));
}

asio::awaitable<Result<http::Reply>> heartbeat(ApiContext& ctx, Call& call) {
  Result<std::string> bearer = co_await checked_agent_bearer(ctx, call.req);
  if (!bearer) co_return bearer.take_error();
  Result<AgentHeartbeatBody> hb =
      co_await read_session_body(ctx, call, *bearer, "/v1/agent/heartbeat", &parse_agent_heartbeat);
  if (!hb) co_return hb.take_error();
  std::string session = std::move(*bearer);
  std::string node = hb->node;
  std::string busy = hb->busy;
  std::optional<std::vector<std::string>> addresses = std::move(hb->addresses);
  Result<AgentHeartbeatReply> reply = co_await ctx.deps.agent_broker->heartbeat(session, node, busy, addresses);
  if (!reply) co_return reply.take_error();
  call.node_id = node;
  co_return json_reply(call.req, bhttp::status::ok, heartbeat_json(*reply));
}

asio::awaitable<Result<http::Reply>> results(ApiContext& ctx, Call& call) {
  Result<std::string> bearer = co_await checked_agent_bearer(ctx, call.req);
  if (!bearer) co_return bearer.take_error();
  Result<AgentResultPost> parsed =
      co_await read_session_body(ctx, call, *bearer, "/v1/agent/results", &parse_agent_result);
  if (!parsed) co_return parsed.take_error();
  AgentResultPost post = std::move(*parsed);
  std::string session = std::move(*bearer);
  std::string node = post.node;
  Status s = co_await ctx.deps.agent_broker->post_result(session, post);
  if (!s) co_return s.take_error();
  call.node_id = node;
  co_return empty_reply(call.req);
}

}  // namespace

void add_agent_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/agent/lookup", Access::kPublic, {}, [&ctx](Call& c) { return lookup(ctx, c); }},
        Needs::kAgentBroker);
  t.add({V::post, "/v1/agent/heartbeat", Access::kPublic, {}, [&ctx](Call& c) { return heartbeat(ctx, c); }},
        Needs::kAgentBroker);
  t.add({V::post, "/v1/agent/results", Access::kPublic, {}, [&ctx](Call& c) { return results(ctx, c); }},
        Needs::kAgentBroker);
}

}  // namespace kiln::api
