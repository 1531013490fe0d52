// /v1/ports: a node's network ports (MACs). A MAC is unique across Kiln: it is
// how PXE and the agent find their node.

#include "common/ids.h"
#include "controller/api/json_input.h"
#include "controller/api/node_input.h"
#include "controller/api/node_view.h"
#include "controller/api/port_flows.h"
#include "controller/api/port_input.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/model/event_types.h"

namespace kiln::api {
namespace {

asio::awaitable<Result<http::Reply>> create_port(ApiContext& ctx, Call& call) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  Result<PortInput> in = parse_port_create(*body);
  if (!in) co_return in.error();

  Result<Node> node = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(in->node); });
  if (!node) {
    if (node.error().code == Code::kNotFound) co_return Error::invalid("/node", "no such node");
    co_return node.error();
  }
  call.node_id = node->id;
  Port port{new_uuid(), node->id, in->mac, in->pxe, ctx.deps.clock.now_ms()};
  EventDraft event = event_draft(call, event_type::kPortCreated, *node);
  event.detail["port"] = port.id;
  event.detail["address"] = port.address;
  Result<Port> created = co_await ctx.deps.db.run([&] { return ctx.deps.store.create_port(port, event); });
  if (!created) {
    if (created.error().code == Code::kConflict)
      co_return Error(Code::kConflict, "a port with address " + in->mac + " already exists",
                      {{"/address", "duplicate address"}});
    if (created.error().code == Code::kNotFound) co_return Error::invalid("/node", "no such node");
    co_return created.error();
  }
  http::Reply reply = json_reply(call.req, bhttp::status::created, port_json(*created));
  reply.response.set(bhttp::field::location, "/v1/ports/" + created->id);
  co_return reply;
}

asio::awaitable<Result<http::Reply>> list_ports(ApiContext& ctx, Call& call) {
  Result<int> limit = call.query.limit();
  if (!limit) co_return limit.error();
  std::optional<std::string> node_id;
  if (auto ref = call.query.get("node")) {
    Result<Node> node = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(*ref); });
    if (!node) {
      if (node.error().code == Code::kNotFound) co_return Error::invalid("node", "no such node");
      co_return node.error();
    }
    node_id = node->id;
  }
  std::string marker = call.query.get("marker").value_or("");
  if (!marker.empty()) {
    // The store pages by "id > marker": a marker that names no port would
    // still page (from wherever it sorts), so it is refused as the nodes
    // list refuses one.
    Result<Port> at = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_port(marker); });
    if (!at) {
      if (at.error().code == Code::kNotFound) co_return Error::invalid("marker", "no such port");
      co_return at.error();
    }
  }
  Result<std::vector<Port>> ports = co_await ctx.deps.db.run(
      [&] { return ctx.deps.store.list_ports(node_id, *limit + 1, marker); });
  if (!ports) {
    if (ports.error().code == Code::kNotFound) co_return Error::invalid("marker", "no such port");
    co_return ports.error();
  }
  bool more = ports->size() > static_cast<std::size_t>(*limit);
  if (more) ports->resize(*limit);
  nlohmann::json items = nlohmann::json::array();
  for (const Port& p : *ports) items.push_back(port_json(p));
  nlohmann::json next = nullptr;
  if (more) {
    auto params = call.query.all();
    params["marker"] = ports->back().id;
    next = absolute_url(call.req, call.info, "/v1/ports", params);
  }
  co_return json_reply(call.req, bhttp::status::ok, {{"ports", std::move(items)}, {"next", next}});
}

asio::awaitable<Result<http::Reply>> get_port(ApiContext& ctx, Call& call) {
  Result<Port> port = co_await load_port(ctx, call, call.param("id"));
  if (!port) co_return port.error();
  co_return json_reply(call.req, bhttp::status::ok, port_json(*port));
}

asio::awaitable<Result<http::Reply>> remove_port(ApiContext& ctx, Call& call) {
  Result<Port> port = co_await load_port(ctx, call, call.param("id"));
  if (!port) co_return port.error();
  Status s = co_await delete_port(ctx, call, *port);
  if (!s) co_return s.error();
  co_return empty_reply(call.req);
}

}  // namespace

void add_port_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/ports", Access::kStaff, {}, [&ctx](Call& c) { return create_port(ctx, c); }});
  t.add({V::get, "/v1/ports", Access::kStaff, {"limit", "marker", "node"},
         [&ctx](Call& c) { return list_ports(ctx, c); }});
  t.add({V::get, "/v1/ports/{id}", Access::kStaff, {}, [&ctx](Call& c) { return get_port(ctx, c); }});
  t.add({V::delete_, "/v1/ports/{id}", Access::kStaff, {},
         [&ctx](Call& c) { return remove_port(ctx, c); }});
}

}  // namespace kiln::api
