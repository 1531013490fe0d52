// The node lifecycle through the Ironic-compatible API (contract:
// ironic_routes.h):
//
//   PUT    /v1/nodes/{node_ident}/states/provision  202, Location .../states
//   PUT    /v1/nodes/{node_ident}/states/power      202, Location .../states
//   PUT    /v1/nodes/{node_ident}/maintenance       202
//   DELETE /v1/nodes/{node_ident}/maintenance       202
//   GET    /v1/nodes/{node_ident}/states            200, Ironic's NodeStates
//   GET    /v1/nodes/{node_ident}/validate          200, per interface {result, reason}
//
// Every verb goes through the same calls as /v1's (Conductor::provision and
// ::power, api::write_maintenance), so a node moved here behaves as one moved
// from /v1, the CLI or the portal: same checks, same events, same engine.
// What differs is only what Ironic's clients expect: its verbs and state
// names (ironic_provision_request.h, ironic_states.h), its status codes, and
// where the engine refuses a verb in the node's state, Ironic's answer: 409
// while an operation holds the node (NodeLocked, which clients retry), 400
// otherwise (InvalidStateRequested, which they do not).

#include <optional>
#include <string>

#include "common/clock.h"
#include "controller/api/reply.h"
#include "controller/ironic/ironic_error.h"
#include "controller/ironic/ironic_provision_request.h"
#include "controller/ironic/ironic_routes.h"
#include "controller/ironic/ironic_states.h"
#include "controller/model/image.h"

namespace kiln::ironic {
namespace {

using api::ApiContext;

// The request body as JSON; an empty body is null. A body that is not JSON
// is a 400.
std::optional<nlohmann::json> body_json(const IronicCall& call, Refusal& why) {
  const std::string& text = call.req().body();
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return nlohmann::json();
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    why = {400, "the request body is not valid JSON"};
    return std::nullopt;
  }
  return j;
}

http::Reply refusal_reply(const IronicCall& call, const Refusal& why) {
  http::Reply r;
  r.response = error_response(call.req(), why.status, why.message);
  return r;
}

// 202, empty body, Location naming the node's states (as Ironic sets it).
http::Reply accepted(const IronicCall& call, bool location) {
  http::Reply r = api::empty_reply(call.req(), bhttp::status::accepted);
  r.response.set(bhttp::field::content_type, "application/json");
  if (location) r.response.set(bhttp::field::location, call.endpoint + "/v1/nodes/" + call.param("node_ident") + "/states");
  return r;
}

// Ironic's driver name for a Kiln driver (the Ironic API's enrolment maps
// fake-hardware to Kiln's fake).
std::string ironic_driver(const Node& n) { return n.bmc.driver == "fake" ? "fake-hardware" : n.bmc.driver; }

// Kiln's engine has no row for the verb in the node's state: Ironic's
// answer (node.py provision()): locked -> 409, otherwise 400.
Error refused_by_engine(const Node& n, const std::string& target, ProvisionEvent verb) {
  std::string shown = std::string(provision_state_name(n.provision_state, n.provision_step));
  if (!n.reservation.empty())
    return Error(Code::kConflict, "Node " + n.id + " is locked by an operation in state \"" + shown +
                                      "\", please retry after the current operation is completed.");
  std::string msg = "The requested action \"" + target + "\" can not be performed on node \"" + n.id +
                    "\" while it is in state \"" + shown + "\".";
  std::string allowed;
  for (ProvisionEvent e : allowed_verbs(n.provision_state)) {
    if (!allowed.empty()) allowed += ", ";
    allowed += std::string(to_string(e));
  }
  (void)verb;
  msg += allowed.empty() ? " Kiln accepts no verb in this state." : " Kiln accepts: " + allowed + ".";
  return Error(Code::kInvalidArgument, msg);
}

// The node's instance_info as the Ironic API stores it.
nlohmann::json instance_info_of(const Node& n);

asio::awaitable<Result<http::Reply>> put_provision(ApiContext& ctx, IronicCall& call) {
  Refusal why;
  std::optional<nlohmann::json> body = body_json(call, why);
  if (!body) co_return refusal_reply(call, why);
  std::optional<ProvisionRequest> req = parse_provision_request(*body, call.version.minor, why);
  if (!req) co_return refusal_reply(call, why);

  Result<Node> node = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!node) co_return node.error();
  if (!next_state(node->provision_state, req->verb)) co_return refused_by_engine(*node, req->target, req->verb);

  ProvisionArgs args;
  if (req->verb == ProvisionEvent::kDeploy) {
    if (node->maintenance)
      co_return Error(Code::kInvalidArgument, "The provisioning operation can't be performed on node " + node->id +
                                                  " because it's in maintenance mode.");
    std::optional<std::string> image = deploy_image(instance_info_of(*node), why);
    if (!image) co_return refusal_reply(call, why);
    args.image = *image;
    // The deploy's configdrive object (or none) goes into instance_info
    // before the verb, as Ironic keeps it there: the conductor's deploy
    // reads it back through own_config_drive() when it writes the drive.
    // Only while the node is free, so a running deploy's drive never changes.
    std::string id = node->id;
    nlohmann::json cd = req->configdrive ? req->configdrive_object : nlohmann::json();
    NodeCondition free;
    free.reservation = std::string();
    Result<Node> kept = co_await ctx.deps.db.run([&] {
      return ctx.deps.store.update_node_if(
          id, free,
          [&](Node& n) -> Status {
            if (!n.ironic.is_object()) n.ironic = nlohmann::json::object();
            nlohmann::json& info = n.ironic["instance_info"];
            if (!info.is_object()) info = nlohmann::json::object();
            if (cd.is_null())
              info.erase(std::string(kConfigDriveKey));
            else
              info[std::string(kConfigDriveKey)] = cd;
            return ok_status();
          },
          {});
    });
    if (!kept) co_return kept.error();
  }
  // Named lvalues into the coroutine call: GCC 12 mis-copies class
  // temporaries passed by value inside a co_await expression.
  std::string node_id = node->id;
  Actor actor = call.base.actor();
  Result<Node> moved = co_await ctx.deps.conductor.provision(node_id, req->verb, args, actor);
  if (!moved) {
    Error e = moved.error();
    // The conductor names /v1's field; the Ironic caller set instance_info.
    if (e.code == Code::kInvalidArgument && e.message.starts_with("/image"))
      e.message = "instance_info/image_source" + e.message.substr(6);
    co_return e;
  }
  if (req->verb == ProvisionEvent::kUndeploy) {
    // Ironic's tear-down empties instance_info and instance_uuid: the next
    // deploy names its image again, and the config drive (user data, keys)
    // does not outlive the instance. Not conditional on the reservation:
    // the undeploy now holds the node and writes only Kiln's fields, under
    // its own condition; this touches only the Ironic document.
    Result<Node> cleared = co_await ctx.deps.db.run([&] {
      return ctx.deps.store.update_node_if(
          node_id, NodeCondition{},
          [](Node& n) -> Status {
            if (!n.ironic.is_object()) n.ironic = nlohmann::json::object();
            n.ironic["instance_info"] = nlohmann::json::object();
            n.ironic.erase("instance_uuid");
            return ok_status();
          },
          {});
    });
    if (!cleared) call.base.log.warn("ironic undeploy: instance_info not cleared", {{"node", node_id}, {"detail", cleared.error().message}});
  }
  call.base.log.info("ironic provision accepted",
                     {{"node", moved->id}, {"target", req->target},
                      {"state", std::string(to_string(moved->provision_state))}});
  co_return accepted(call, true);
}

asio::awaitable<Result<http::Reply>> put_power(ApiContext& ctx, IronicCall& call) {
  // The node first, as Ironic retrieves it before reading the target: any
  // role may use this route, so a tenant naming another tenant's node gets
  // that 404 whatever body it sends (not a 400 about the body).
  Result<Node> node = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!node) co_return node.error();
  Refusal why;
  std::optional<nlohmann::json> body = body_json(call, why);
  if (!body) co_return refusal_reply(call, why);
  std::optional<PowerRequest> req = parse_power_request(*body, call.version.minor, why);
  if (!req) co_return refusal_reply(call, why);
  // Ironic: no power change while cleaning (400, InvalidStateRequested).
  std::string shown(provision_state_name(node->provision_state, node->provision_step));
  if (shown == state::kCleaning || shown == state::kCleanWait)
    co_return Error(Code::kInvalidArgument, "The requested action \"" + req->target + "\" can not be performed on node \"" +
                                                node->id + "\" while it is in state \"" + shown + "\".");
  std::string node_id = node->id;  // named: see put_provision()
  Actor actor = call.base.actor();
  PowerAction action = req->action;
  Result<Node> moved = co_await ctx.deps.conductor.power(node_id, action, actor);
  if (!moved) co_return moved.error();
  call.base.log.info("ironic power accepted", {{"node", moved->id}, {"target", req->target}});
  co_return accepted(call, true);
}

asio::awaitable<Result<http::Reply>> put_maintenance(ApiContext& ctx, IronicCall& call, bool on) {
  Refusal why;
  std::string reason;
  if (on) {
    std::optional<nlohmann::json> body = body_json(call, why);
    if (!body) co_return refusal_reply(call, why);
    std::optional<std::string> r = parse_maintenance_reason(*body, why);
    if (!r) co_return refusal_reply(call, why);
    reason = std::move(*r);
  }
  Result<Node> node = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!node) co_return node.error();
  Node current = std::move(*node);  // named: see put_provision()
  std::optional<int64_t> any_version;
  Result<Node> updated = co_await api::write_maintenance(ctx, call.base, current, on, reason, any_version);
  if (!updated) co_return updated.error();
  co_return accepted(call, false);
}

nlohmann::json null_or(const std::optional<std::string>& s) { return s ? nlohmann::json(*s) : nlohmann::json(); }

asio::awaitable<Result<http::Reply>> get_states(ApiContext& ctx, IronicCall& call) {
  Result<Node> node = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!node) co_return node.error();
  NodeStates s = node_states(*node);
  const int minor = call.version.minor;
  nlohmann::json out = {
      {"console_enabled", false},
      {"last_error", node->last_error.empty() ? nlohmann::json() : nlohmann::json(node->last_error)},
      {"power_state", null_or(s.power_state)},
      {"provision_state", null_or(versioned_provision_state(s.provision_state, minor))},
      {"target_power_state", null_or(s.target_power_state)},
      {"target_provision_state", null_or(s.target_provision_state)},
      // Kiln keeps one update time per node; a state change is one of its writes.
      {"provision_updated_at", node->updated_at > 0 ? nlohmann::json(format_rfc3339(node->updated_at)) : nlohmann::json()},
  };
  if (minor >= 12) {
    out["raid_config"] = nlohmann::json::object();
    out["target_raid_config"] = nlohmann::json::object();
  }
  if (minor >= 75) {
    out["boot_mode"] = node->boot_mode;
    out["secure_boot"] = nullptr;
  }
  co_return ironic_json_reply(call, bhttp::status::ok, out);
}

nlohmann::json result(bool ok, const std::string& reason = "") {
  nlohmann::json r = {{"result", ok}};
  if (!ok) r["reason"] = reason;
  return r;
}

asio::awaitable<Result<http::Reply>> get_validate(ApiContext& ctx, IronicCall& call) {
  Result<Node> node = co_await api::load_visible_node(ctx, call.base, call.param("node_ident"));
  if (!node) co_return node.error();
  const std::string driver = ironic_driver(*node);
  const bool fake = node->bmc.driver == "fake";
  nlohmann::json out = nlohmann::json::object();

  // power and management: the driver's own no-I/O check of the BMC fields
  // (what enrolment and PATCH check), plus a password where one is needed.
  Status bmc = ctx.deps.conductor.validate_bmc(node->bmc);
  std::string bmc_reason = bmc ? std::string() : bmc.error().message;
  if (bmc && !fake && node->bmc.password_sealed.empty()) bmc_reason = "the BMC password is not set";
  out["power"] = result(bmc_reason.empty(), bmc_reason);
  out["management"] = result(bmc_reason.empty(), bmc_reason);

  // boot and inspect: redfish and ipmi nodes boot Kiln's deploy ramdisk,
  // whose agent finds its node by a port's MAC.
  std::string ports_reason = (!fake && node->ports.empty())
                                 ? "Node " + node->id + " has no ports: the deploy ramdisk's agent finds its node by MAC"
                                 : "";
  out["boot"] = result(ports_reason.empty(), ports_reason);
  out["inspect"] = result(ports_reason.empty(), ports_reason);

  // deploy: an image Kiln can write, as the deploy verb checks it.
  Refusal why;
  std::optional<std::string> image = deploy_image(instance_info_of(*node), why);
  std::string deploy_reason = image ? "" : why.message;
  if (image) {
    std::string ref = *image;
    Result<Image> found = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_image(ref); });
    if (!found && found.error().code == Code::kNotFound) {
      deploy_reason = "instance_info/image_source: no such image in Kiln: " + ref;
    } else if (!found) {
      deploy_reason = found.error().message;
    } else if (Status ready = image_deployable(*found); !ready) {
      deploy_reason = ready.error().message;
    }
  }
  if (deploy_reason.empty() && !ports_reason.empty()) deploy_reason = ports_reason;
  out["deploy"] = result(deploy_reason.empty(), deploy_reason);

  // Interfaces Kiln has as no-ops (Ironic's noop network and storage pass).
  out["network"] = result(true);
  out["storage"] = result(true);
  // Interfaces Kiln does not have: what Ironic's no-* implementations say.
  for (const char* iface : {"bios", "console", "raid", "rescue"})
    out[iface] = result(false, "Driver " + driver + " does not support " + iface + " (disabled or not implemented).");
  co_return ironic_json_reply(call, bhttp::status::ok, out);
}

nlohmann::json instance_info_of(const Node& n) {
  if (!n.ironic.is_object()) return nlohmann::json();
  auto it = n.ironic.find("instance_info");
  return it == n.ironic.end() ? nlohmann::json() : *it;
}

}  // namespace

void add_ironic_provision_routes(IronicRouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  using api::Access;
  const std::string node = "node_ident";
  t.add({V::put, "/v1/nodes/{node_ident}/states/provision", Access::kStaff, {},
         [&ctx](IronicCall& c) { return put_provision(ctx, c); }, node});
  t.add({V::put, "/v1/nodes/{node_ident}/states/power", Access::kAnyRole, {},
         [&ctx](IronicCall& c) { return put_power(ctx, c); }, node});
  t.add({V::put, "/v1/nodes/{node_ident}/maintenance", Access::kStaff, {},
         [&ctx](IronicCall& c) { return put_maintenance(ctx, c, true); }, node});
  t.add({V::delete_, "/v1/nodes/{node_ident}/maintenance", Access::kStaff, {},
         [&ctx](IronicCall& c) { return put_maintenance(ctx, c, false); }, node});
  t.add({V::get, "/v1/nodes/{node_ident}/states", Access::kAnyRole, {},
         [&ctx](IronicCall& c) { return get_states(ctx, c); }, node});
  t.add({V::get, "/v1/nodes/{node_ident}/validate", Access::kStaff, {},
         [&ctx](IronicCall& c) { return get_validate(ctx, c); }, node});
}

}  // namespace kiln::ironic
