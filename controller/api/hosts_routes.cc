// /v1/hosts: hypervisor hosts for virtual nodes, and
// /v1/nocloud/{node}/...: cloud-init NoCloud documents for virtual nodes.
//
// POST registers a host by libvirt URI and answers 201 at once with status
// "connecting": the connect runs in the background (HostRegistry), because
// libvirt's open can hang for minutes on a host that does not answer. The
// host then turns "ready", or "unreachable" with the reason in
// status_reason: a hypervisor being down is a state of the world, not bad
// input, and kilnd keeps retrying it with backoff (so an operator can
// register hosts before they come up). Malformed URIs are 400.
// The password is write-only (sealed like BMC passwords) and only ever
// travels in the `password` field: a URI with a password in its userinfo
// is 400, since libvirt would pass it to ssh on the command line and echo
// it in its messages, and the URI itself is shown and logged.
//
// NoCloud routes are public; see controller/hosts/nocloud.h for the threat model.

#include "common/ids.h"
#include "controller/agent/agent_authority.h"
#include "controller/api/boot_routes.h"
#include "controller/boot/boot_script.h"
#include "controller/api/host_input.h"
#include "controller/api/json_input.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/api/virtual_nodes.h"
#include "controller/hosts/host_registry.h"
#include "controller/hosts/nocloud.h"
#include "controller/hosts/placement.h"

namespace kiln::api {
namespace {

nlohmann::json host_json(const Host& h, const std::vector<HostReservation>* booked,
                         const std::vector<VirtualMachine>* vms) {
  nlohmann::json j = {{"id", h.id},
                      {"name", h.name},
                      {"uri", libvirt::display_uri(h.uri)},  // rows stored before passwords were refused
                      {"username", h.username.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.username)},
                      {"password_set", !h.password_sealed.empty()},
                      {"options", h.options},
                      {"status", h.status},
                      {"status_reason", h.status_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.status_reason)},
                      {"capacity", h.capacity},
                      {"discovered_at", h.discovered_at},
                      {"created_at", h.created_at},
                      {"updated_at", h.updated_at}};
  if (booked) {
    j["free"] = free_capacity(h, *booked);
    nlohmann::json rows = nlohmann::json::array();
    for (const HostReservation& r : *booked)
      rows.push_back({{"node", r.node_id}, {"kind", r.kind}, {"item", r.item}, {"amount", r.amount}});
    j["reservations"] = rows;
  }
  if (vms) {
    nlohmann::json list = nlohmann::json::array();
    for (const VirtualMachine& v : *vms)
      list.push_back({{"node", v.node_id}, {"domain", v.domain}, {"mac", v.mac}, {"state", v.state},
                      {"placement", v.placement}});
    j["virtual_machines"] = list;
  }
  return j;
}

asio::awaitable<Result<http::Reply>> create_host(ApiContext& ctx, Call& call) {
  Result<nlohmann::json> body = parse_json_body(call.req, {"application/json"});
  if (!body) co_return body.error();
  Result<HostInput> in = parse_host_create(*body);
  if (!in) co_return in.error();
  Host h = std::move(in->host);
  const std::optional<std::string>& password = in->password;
  if (password && !password->empty()) h.password_sealed = ctx.deps.secrets.seal(*password);
  h.id = new_uuid();
  h.status = "connecting";
  Result<Host> created = co_await ctx.deps.db.run([&] { return ctx.deps.store.create_host(h); });
  if (!created) co_return created.error();
  call.log.info("host registered", {{"host", created->name}, {"uri", libvirt::display_uri(created->uri)}});
  // Never awaited here: the reply must not wait on the hypervisor.
  ctx.deps.hosts->connect_in_background(created->id);
  http::Reply reply = json_reply(call.req, bhttp::status::created, host_json(*created, nullptr, nullptr));
  reply.response.set(bhttp::field::location, "/v1/hosts/" + created->id);
  co_return reply;
}

asio::awaitable<Result<http::Reply>> list_hosts(ApiContext& ctx, Call& call) {
  Result<std::vector<Host>> hosts = co_await ctx.deps.db.run([&] { return ctx.deps.store.list_hosts(); });
  if (!hosts) co_return hosts.error();
  nlohmann::json items = nlohmann::json::array();
  for (const Host& h : *hosts) {
    std::string id = h.id;
    Result<std::vector<HostReservation>> booked =
        co_await ctx.deps.db.run([&] { return ctx.deps.store.host_reservations(id); });
    items.push_back(host_json(h, booked ? &*booked : nullptr, nullptr));
    items.back().erase("reservations");
  }
  co_return json_reply(call.req, bhttp::status::ok, {{"hosts", std::move(items)}, {"next", nullptr}});
}

asio::awaitable<Result<http::Reply>> get_host(ApiContext& ctx, Call& call) {
  std::string ref = call.param("id");
  Result<Host> h = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_host(ref); });
  if (!h) co_return h.error();
  std::string id = h->id;
  Result<std::vector<HostReservation>> booked =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.host_reservations(id); });
  if (!booked) co_return booked.error();
  Result<std::vector<VirtualMachine>> vms =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.list_virtual_machines(id); });
  if (!vms) co_return vms.error();
  co_return json_reply(call.req, bhttp::status::ok, host_json(*h, &*booked, &*vms));
}

asio::awaitable<Result<http::Reply>> delete_host(ApiContext& ctx, Call& call) {
  std::string ref = call.param("id");
  Result<Host> h = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_host(ref); });
  if (!h) co_return h.error();
  std::string id = h->id;
  Status s = co_await ctx.deps.db.run([&] { return ctx.deps.store.delete_host(id); });
  if (!s) co_return s.error();
  // Its connection, a connect in flight and the reconnect loop all stop.
  if (ctx.deps.hosts) ctx.deps.hosts->forget(id);
  co_return empty_reply(call.req);
}

// The node, only while a guest may legitimately ask for its seed.
asio::awaitable<Result<Node>> seeding_node(ApiContext& ctx, Call& call) {
  std::string ref = call.param("node");
  Result<Node> n = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(ref); });
  if (!n || n->kind != NodeKind::kVirtual ||
      (n->provision_state != ProvisionState::kDeploying && n->provision_state != ProvisionState::kValidating))
    co_return Error(Code::kNotFound, "no such resource: " + std::string(call.req.target()));
  // Bound to the VM's DHCP lease (docs/agent-protocol.md, "Trust"): anyone
  // else gets the answer an unknown node gets.
  Result<CallerBinding> bound = co_await bind_caller_to_node(ctx, call, n->id);
  if (!bound) co_return bound.take_error();
  if (*bound != CallerBinding::kBound) co_return Error(Code::kNotFound, "no such resource: " + std::string(call.req.target()));
  co_return n;
}

http::Reply text_reply(const http::Request& req, std::string body) {
  http::Reply reply;
  reply.response = http::Response{bhttp::status::ok, req.version()};
  reply.response.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  reply.response.set(bhttp::field::cache_control, "no-store");
  reply.response.keep_alive(req.keep_alive());
  reply.response.body() = std::move(body);
  reply.response.prepare_payload();
  return reply;
}

asio::awaitable<Result<http::Reply>> nocloud(ApiContext& ctx, Call& call, int doc) {
  Result<Node> n = co_await seeding_node(ctx, call);
  if (!n) co_return n.error();
  if (doc == 0) co_return text_reply(call.req, nocloud_meta_data(*n));
  if (doc == 2) co_return text_reply(call.req, nocloud_vendor_data());
  NoCloudAgent agent;
  if (ctx.deps.nocloud_base_url) agent.boot_url = ctx.deps.nocloud_base_url();
  if (ctx.deps.boot != nullptr) agent.tls_sha256 = ctx.deps.boot->tls_sha256;
  if (ctx.deps.agents != nullptr) {
    Result<std::string> secret = co_await ctx.deps.agents->os_secret(*n);
    if (!secret) co_return secret.take_error();
    agent.os_secret = *secret;
  }
  if (doc == 1) {
    // The deploy's one-time phone-home URL: cloud-init posts the OS's SSH
    // host keys there (phone_home_routes.cc).
    if (ctx.deps.agents != nullptr && !agent.boot_url.empty()) {
      Result<std::string> token = co_await ctx.deps.agents->phone_home_token(*n);
      if (!token) co_return token.take_error();
      agent.phone_home_url = agent.boot_url + "/v1/phone-home/" + *token;
    }
    // A member of an allocation is the tenant's: the allocation's keys go in
    // beside any the node was made with.
    std::vector<std::string> keys = node_ssh_keys(*n);
    std::string tenant_user_data;
    if (!n->allocation.empty()) {
      std::string aid = n->allocation;
      Result<Allocation> a = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_allocation(aid, ""); });
      if (!a && a.error().code != Code::kNotFound) co_return a.take_error();
      if (a) {
        keys = merged_ssh_keys(std::move(keys), a->ssh_keys);
        tenant_user_data = a->user_data;
      }
    }
    co_return text_reply(call.req, nocloud_user_data(*n, keys, agent, tenant_user_data));
  }
  co_return text_reply(call.req, nocloud_agent_env(*n, agent));
}

}  // namespace

void add_host_routes(RouteTable& t, ApiContext& ctx) {
  using V = bhttp::verb;
  t.add({V::post, "/v1/hosts", Access::kStaff, {}, [&ctx](Call& c) { return create_host(ctx, c); }}, Needs::kHosts);
  t.add({V::get, "/v1/hosts", Access::kStaff, {}, [&ctx](Call& c) { return list_hosts(ctx, c); }});
  t.add({V::get, "/v1/hosts/{id}", Access::kStaff, {}, [&ctx](Call& c) { return get_host(ctx, c); }});
  t.add({V::delete_, "/v1/hosts/{id}", Access::kStaff, {}, [&ctx](Call& c) { return delete_host(ctx, c); }});
  t.add({V::get, "/v1/nocloud/{node}/meta-data", Access::kPublic, {},
         [&ctx](Call& c) { return nocloud(ctx, c, 0); }});
  t.add({V::get, "/v1/nocloud/{node}/user-data", Access::kPublic, {},
         [&ctx](Call& c) { return nocloud(ctx, c, 1); }});
  t.add({V::get, "/v1/nocloud/{node}/vendor-data", Access::kPublic, {},
         [&ctx](Call& c) { return nocloud(ctx, c, 2); }});
  // The os-phase agent's seed (KEY=VALUE), for an OS without cloud-init (the
  // demo OS reads it through the SMBIOS serial; agent/deploy/agent_seed.h).
  t.add({V::get, "/v1/nocloud/{node}/kiln-agent.env", Access::kPublic, {},
         [&ctx](Call& c) { return nocloud(ctx, c, 3); }});
}

}  // namespace kiln::api
