#include "controller/api/port_flows.h"

#include "controller/api/reply.h"
#include "controller/model/event_types.h"

namespace kiln::api {

boost::asio::awaitable<Result<Port>> load_port(ApiContext& ctx, Call& call, std::string id) {
  Result<Port> port = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_port(id); });
  if (!port) {
    if (port.error().code == Code::kNotFound) co_return Error(Code::kNotFound, "no such port: " + id);
    co_return port.error();
  }
  call.node_id = port->node_id;
  co_return port;
}

boost::asio::awaitable<Status> delete_port(ApiContext& ctx, Call& call, const Port& port, nlohmann::json extra_detail) {
  Node owner;
  owner.id = port.node_id;
  Result<Node> node = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(owner.id); });
  if (node) owner.tenant = node->tenant;  // so the owner's event feed shows it
  EventDraft event = event_draft(call, event_type::kPortDeleted, owner);
  event.detail["port"] = port.id;
  event.detail["address"] = port.address;
  for (auto& [k, v] : extra_detail.items()) event.detail[k] = v;
  co_return co_await ctx.deps.db.run([&] { return ctx.deps.store.delete_port(port.id, event); });
}

}  // namespace kiln::api
