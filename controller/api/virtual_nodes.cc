#include "controller/api/virtual_nodes.h"

#include "common/ids.h"
#include "controller/api/json_input.h"
#include "controller/api/node_input.h"
#include "controller/api/reply.h"
#include "controller/hosts/placement.h"
#include "controller/model/event_types.h"

namespace kiln::api {

asio::awaitable<Result<http::Reply>> create_virtual_node(ApiContext& ctx, Call& call, nlohmann::json body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  Node node;
  node.kind = NodeKind::kVirtual;
  (void)r.string("kind");
  // The same rules and limits as bare metal (node_input.h).
  parse_common_fields(r, node, errors);
  if (!r.has("profile")) r.error("profile", "required");
  else if (body["profile"] == "") r.error("profile", "must not be empty");
  std::optional<std::string> host = r.string("host");
  if (host && (host->empty() || host->size() > 255)) r.error("host", "must be 1-255 characters");
  nlohmann::json keys = nlohmann::json::array();
  if (auto v = r.string_array("ssh_keys")) {
    for (std::size_t i = 0; i < v->size(); ++i) {
      const std::string& k = (*v)[i];
      if (k.empty() || k.size() > 16384 || k.find('\n') != std::string::npos)
        errors.push_back({"/ssh_keys/" + std::to_string(i), "must be one public key line"});
      keys.push_back(k);
    }
  }
  r.finish();
  if (!errors.empty()) co_return invalid_fields(std::move(errors));

  std::string profile_name = node.profile;
  Result<Profile> p = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_profile(profile_name); });
  if (!p) {
    if (p.error().code == Code::kNotFound) co_return Error::invalid("/profile", "no such profile: " + profile_name);
    co_return p.error();
  }
  Result<Flavour> flavour = flavour_of_profile(p->doc, p->name);
  if (!flavour) co_return flavour.error();
  node.profile = p->name;
  std::string host_name;
  if (host) {
    std::string ref = *host;
    Result<Host> h = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_host(ref); });
    if (!h) {
      if (h.error().code == Code::kNotFound) co_return Error::invalid("/host", "no such host: " + ref);
      co_return h.error();
    }
    host_name = h->name;
  }
  int64_t now = ctx.deps.clock.now_ms();
  node.id = new_uuid();
  node.created_at = now;
  node.updated_at = now;
  node.version = 1;
  node.provision_state = ProvisionState::kAvailable;
  node.power_state = PowerState::kOff;
  node.host = host_name;
  node.bmc.driver = "libvirt";
  node.bmc.options = nlohmann::json::object();
  if (!host_name.empty()) node.bmc.options["host"] = host_name;
  if (!keys.empty()) node.bmc.options["ssh_keys"] = keys;
  EventDraft event = event_draft(call, event_type::kNodeCreated, node);
  event.to_state = std::string(to_string(node.provision_state));
  event.detail["kind"] = "virtual";
  Result<Node> created = co_await ctx.deps.db.run([&] { return ctx.deps.store.create_node(node, event); });
  if (!created) co_return created.error();
  call.node_id = created->id;
  call.log.info("virtual node created", {{"node", created->id}, {"profile", created->profile}, {"host", host_name}});
  co_return node_reply(call, bhttp::status::created, *created, /*location=*/true);
}

asio::awaitable<Status> check_virtual_fit(ApiContext& ctx, Node node) {
  std::string profile_name = node.profile;
  Result<Profile> p = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_profile(profile_name); });
  if (!p) co_return Error::invalid("/profile", "profile " + profile_name + ": " + p.error().message);
  Result<Flavour> flavour = flavour_of_profile(p->doc, p->name);
  if (!flavour) co_return flavour.error();
  std::string requested = node.bmc.options.value("host", node.host);
  std::vector<Host> candidates;
  if (!requested.empty()) {
    Result<Host> h = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_host(requested); });
    if (!h) co_return Error::invalid("/host", "no such host: " + requested);
    candidates.push_back(*h);
  } else {
    Result<std::vector<Host>> all = co_await ctx.deps.db.run([&] { return ctx.deps.store.list_hosts(); });
    if (!all) co_return all.error();
    candidates = *all;
    if (candidates.empty()) co_return Error(Code::kConflict, "no hypervisor host is registered");
  }
  std::string shortages;
  for (const Host& h : candidates) {
    std::string id = h.id;
    Result<std::vector<HostReservation>> booked =
        co_await ctx.deps.db.run([&] { return ctx.deps.store.host_reservations(id); });
    if (!booked) co_return booked.error();
    Result<PlacementPlan> plan = plan_placement(h, *booked, *flavour, node.id);
    if (plan) co_return ok_status();
    shortages += (shortages.empty() ? "" : "; ") + plan.error().message;
  }
  co_return Error(Code::kConflict, "no host has room for this node: " + shortages);
}

}  // namespace kiln::api
