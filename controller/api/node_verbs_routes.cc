// Node actions: provision and power verbs (handed to the conductor, 202),
// maintenance on/off, and the inspection inventory.

#include <cctype>

#include "controller/api/json_input.h"
#include "controller/api/node_view.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/api/virtual_nodes.h"
#include "controller/model/state_machine.h"
#include "controller/model/event_types.h"

namespace kiln::api {
namespace {

constexpr const char* kProvisionVerbs = "manage, inspect, provide, deploy, undeploy, abort";
constexpr const char* kPowerVerbs = "on, off, reboot, soft_off";

// The nodes deployed with one allocation id validate nccl_multinode together.
bool valid_allocation_id(const std::string& s) {
  if (s.empty() || s.size() > 64 || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

asio::awaitable<Result<http::Reply>> provision(ApiContext& ctx, Call& call) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  std::vector<FieldError> errors;
  ObjectReader r(*body, "", errors);
  std::optional<std::string> target = r.string("target", true);
  std::optional<std::string> image = r.string("image");
  std::optional<std::string> allocation = r.string("allocation");
  r.finish();
  std::optional<ProvisionEvent> verb;
  if (target) {
    verb = parse_provision_verb(*target);
    if (!verb) errors.push_back({"/target", std::string("must be one of ") + kProvisionVerbs});
  }
  if (allocation) {
    if (verb && *verb != ProvisionEvent::kDeploy)
      errors.push_back({"/allocation", "only allowed with target deploy"});
    else if (!valid_allocation_id(*allocation))
      errors.push_back({"/allocation", "must be 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit"});
  }
  if (!errors.empty()) co_return invalid_fields(std::move(errors));

  Result<Node> node = co_await load_visible_node(ctx, call, call.param("id"));
  if (!node) co_return node.error();
  // Arguments are named lvalues: GCC 12 mis-copies class temporaries passed by
  // value to a coroutine inside a co_await expression (double free).
  std::string node_id = node->id;
  ProvisionArgs args{image.value_or(""), allocation.value_or("")};
  Actor actor = call.actor();
  if (*verb == ProvisionEvent::kDeploy && node->kind == NodeKind::kVirtual &&
      node->provision_state == ProvisionState::kAvailable) {
    // 409 naming what is short now, rather than a deploy_failed a moment later.
    Node virtual_node = *node;
    Status fits = co_await check_virtual_fit(ctx, virtual_node);
    if (!fits) co_return fits.error();
  }
  Result<Node> moved = co_await ctx.deps.conductor.provision(node_id, *verb, args, actor);
  if (!moved) co_return moved.error();
  call.log.info("provision verb accepted",
                {{"node", moved->id}, {"verb", *target},
                 {"state", std::string(to_string(moved->provision_state))}});
  co_return node_reply(call, bhttp::status::accepted, *moved, /*location=*/true);
}

asio::awaitable<Result<http::Reply>> power(ApiContext& ctx, Call& call) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  std::vector<FieldError> errors;
  ObjectReader r(*body, "", errors);
  std::optional<std::string> target = r.string("target", true);
  r.finish();
  std::optional<PowerAction> action;
  if (target) {
    action = parse_power_action(*target);
    if (!action) errors.push_back({"/target", std::string("must be one of ") + kPowerVerbs});
  }
  if (!errors.empty()) co_return invalid_fields(std::move(errors));

  Result<Node> node = co_await load_visible_node(ctx, call, call.param("id"));
  if (!node) co_return node.error();
  std::string node_id = node->id;  // named: see provision()
  Actor actor = call.actor();
  Result<Node> moved = co_await ctx.deps.conductor.power(node_id, *action, actor);
  if (!moved) co_return moved.error();
  call.log.info("power action accepted", {{"node", moved->id}, {"action", *target}});
  co_return node_reply(call, bhttp::status::accepted, *moved, /*location=*/true);
}

// Sets (on=true, with an optional reason) or clears maintenance; clearing
// also clears `fault`, since an operator has looked at the node.
asio::awaitable<Result<http::Reply>> maintenance(ApiContext& ctx, Call& call, bool on) {
  Result<std::optional<int64_t>> if_match = parse_if_match(call.req);
  if (!if_match) co_return if_match.error();
  std::string reason;
  if (on) {
    Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"}, /*allow_empty=*/true);
    if (!body) co_return body.error();
    std::vector<FieldError> errors;
    ObjectReader r(*body, "", errors);
    if (auto v = r.string("reason")) {
      if (v->size() > 1024) r.error("reason", "must be at most 1024 characters");
      reason = *v;
    }
    r.finish();
    if (!errors.empty()) co_return invalid_fields(std::move(errors));
  }
  Result<Node> node = co_await load_visible_node(ctx, call, call.param("id"));
  if (!node) co_return node.error();
  Node current = std::move(*node);  // named: see provision()
  Result<Node> updated = co_await write_maintenance(ctx, call, current, on, reason, *if_match);
  if (!updated) co_return updated.error();
  call.log.info(on ? "maintenance set" : "maintenance cleared", {{"node", updated->id}});
  co_return node_reply(call, bhttp::status::ok, *updated);
}

asio::awaitable<Result<http::Reply>> inventory(ApiContext& ctx, Call& call) {
  Result<Node> node = co_await load_visible_node(ctx, call, call.param("id"));
  if (!node) co_return node.error();
  if (node->inventory.is_null()) co_return Error(Code::kNotFound, "node has not been inspected");
  co_return json_reply(call.req, bhttp::status::ok, node->inventory);
}

}  // namespace

asio::awaitable<Result<Node>> write_maintenance(ApiContext& ctx, const Call& call, const Node& node, bool on,
                                                std::string reason, std::optional<int64_t> version) {
  NodeCondition cond;
  cond.version = version;
  EventDraft event = event_draft(call, on ? event_type::kNodeMaintenanceSet : event_type::kNodeMaintenanceCleared, node);
  if (on) event.detail["reason"] = reason;
  co_return co_await ctx.deps.db.run([&] {
    return ctx.deps.store.update_node_if(
        node.id, cond,
        [&](Node& n) -> Status {
          n.maintenance = on;
          n.maintenance_reason = on ? reason : std::string();
          if (!on) n.fault.clear();
          return ok_status();
        },
        {event});
  });
}

void add_node_verb_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::put, "/v1/nodes/{id}/states/provision", Access::kStaff, {},
         [&ctx](Call& c) { return provision(ctx, c); }});
  t.add({V::put, "/v1/nodes/{id}/states/power", Access::kAnyRole, {},
         [&ctx](Call& c) { return power(ctx, c); }});
  t.add({V::put, "/v1/nodes/{id}/maintenance", Access::kStaff, {},
         [&ctx](Call& c) { return maintenance(ctx, c, true); }});
  t.add({V::delete_, "/v1/nodes/{id}/maintenance", Access::kStaff, {},
         [&ctx](Call& c) { return maintenance(ctx, c, false); }});
  t.add({V::get, "/v1/nodes/{id}/inventory", Access::kAnyRole, {},
         [&ctx](Call& c) { return inventory(ctx, c); }});
}

}  // namespace kiln::api
