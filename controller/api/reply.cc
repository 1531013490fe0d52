#include "controller/api/reply.h"

#include <charconv>

#include "common/json_text.h"
#include "controller/api/node_view.h"
#include "controller/api/node_writer.h"

namespace kiln::api {

http::Reply json_reply(const http::Request& req, bhttp::status status, const nlohmann::json& body) {
  http::Reply reply;
  reply.response = http::Response{status, req.version()};
  reply.response.set(bhttp::field::content_type, "application/json");
  reply.response.set(bhttp::field::cache_control, "no-store");
  reply.response.keep_alive(req.keep_alive());
  reply.response.body() = dump_json(body);
  reply.response.prepare_payload();
  return reply;
}

http::Reply raw_json_reply(const http::Request& req, bhttp::status status, std::string body) {
  http::Reply reply;
  reply.response = http::Response{status, req.version()};
  reply.response.set(bhttp::field::content_type, "application/json");
  reply.response.set(bhttp::field::cache_control, "no-store");
  reply.response.keep_alive(req.keep_alive());
  reply.response.body() = std::move(body);
  reply.response.prepare_payload();
  return reply;
}

http::Reply empty_reply(const http::Request& req, bhttp::status status) {
  http::Reply reply;
  reply.response = http::Response{status, req.version()};
  reply.response.keep_alive(req.keep_alive());
  reply.response.prepare_payload();
  return reply;
}

http::Reply node_reply(const Call& call, bhttp::status status, const Node& node, bool location) {
  std::string body;
  append_node_json(body, node, call.principal.role, NodeDetail::kFull, {}, call.ring.get());
  http::Reply reply = raw_json_reply(call.req, status, std::move(body));
  reply.response.set(bhttp::field::etag, node_etag(node));
  if (location) reply.response.set(bhttp::field::location, "/v1/nodes/" + node.id);
  return reply;
}

asio::awaitable<Result<Node>> load_visible_node(ApiContext& ctx, Call& call,
                                                std::string_view id_or_name) {
  std::string key(id_or_name);
  Result<Node> node = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(key); });
  if (!node) {
    if (node.error().code == Code::kNotFound) co_return Error(Code::kNotFound, "no such node: " + key);
    co_return node.error();
  }
  if (!call.principal.sees_tenant(node->tenant))
    co_return Error(Code::kNotFound, "no such node: " + key);
  call.node_id = node->id;
  co_return node;
}

Result<std::optional<int64_t>> parse_if_match(const http::Request& req) {
  auto it = req.find(bhttp::field::if_match);
  if (it == req.end()) return std::optional<int64_t>();
  std::string_view v = it->value();
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v == "*") return std::optional<int64_t>();
  if (v.starts_with("W/")) v.remove_prefix(2);
  Error bad = Error::invalid("If-Match", "must be an ETag \"<version>\" from a node response");
  if (v.size() < 3 || v.front() != '"' || v.back() != '"') return bad;
  v = v.substr(1, v.size() - 2);
  int64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || n < 0) return bad;
  return std::optional<int64_t>(n);
}

EventDraft event_draft(const Call& call, std::string type, const Node& node) {
  EventDraft e;
  e.type = std::move(type);
  e.node_id = node.id;
  e.request_id = call.info.request_id;
  e.tenant = node.tenant;
  e.detail = {{"actor", call.principal.name},
              {"actor_id", call.principal.token_id},
              {"role", std::string(to_string(call.principal.role))}};
  return e;
}

}  // namespace kiln::api
