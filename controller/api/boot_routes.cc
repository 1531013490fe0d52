// GET /boot/{script}: the iPXE scripts of the boot chain (no auth: iPXE has
// no credentials). "boot.ipxe" is the generic script dnsmasq hands iPXE; it
// chains "<mac>.ipxe", which is chosen from the node owning that MAC
// (controller/boot/boot_script.h has the table). A ramdisk boot mints a fresh
// one-time agent token each time it is served (AgentAuthority).

#include "controller/agent/agent_authority.h"
#include "controller/api/boot_routes.h"
#include "controller/api/node_input.h"
#include "controller/api/query.h"
#include "controller/boot/boot_script.h"

namespace kiln::api {

std::string boot_base_url(const ApiContext& ctx, const Call& call) {
  if (ctx.deps.boot != nullptr && !ctx.deps.boot->boot_url.empty()) return ctx.deps.boot->boot_url;
  std::string host(call.req[bhttp::field::host]);
  if (host.empty()) host = "localhost";
  return std::string(call.info.tls ? "https://" : "http://") + host;
}

namespace {

http::Reply script_reply(const http::Request& req, std::string text) {
  http::Reply reply;
  reply.response = http::Response{bhttp::status::ok, req.version()};
  reply.response.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  reply.response.set(bhttp::field::cache_control, "no-store");
  reply.response.keep_alive(req.keep_alive());
  reply.response.body() = std::move(text);
  reply.response.prepare_payload();
  return reply;
}

std::string deploy_ramdisk_name(const ApiContext& ctx) {
  if (ctx.deps.boot != nullptr) return ctx.deps.boot->deploy_ramdisk;
  return boot::BootSettings().deploy_ramdisk;
}

asio::awaitable<Result<http::Reply>> ramdisk_reply(ApiContext& ctx, Call& call, const Node& node,
                                                   const std::string& mac, const std::string& base) {
  AgentAuthority* agents = ctx.deps.agents;
  if (agents == nullptr) co_return Error(Code::kUnavailable, "agent broker not configured");
  const std::string ramdisk_name = deploy_ramdisk_name(ctx);
  Result<Image> ramdisk = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_image(ramdisk_name); });
  if (!ramdisk || ramdisk->kind != "ramdisk") {
    std::string why = !ramdisk ? (ramdisk.error().code == Code::kNotFound
                                      ? "the deploy ramdisk image " + ramdisk_name + " is not registered"
                                      : "cannot read the deploy ramdisk image: " + ramdisk.error().message)
                               : "image " + ramdisk_name + " is not a ramdisk image";
    call.log.warn("cannot boot the deploy ramdisk", {{"node", node.id}, {"reason", why}});
    co_return script_reply(call.req, boot::retry_script(base, mac, why));
  }
  Result<std::string> token = co_await agents->mint_boot_token(node);
  if (!token) co_return token.error();
  boot::RamdiskBoot b;
  b.boot_url = base;
  b.image = ramdisk->id;
  b.kernel_args = ramdisk->kernel_args;
  b.node_id = node.id;
  b.token = *token;
  b.mac = mac;
  call.log.info("boot script served", {{"node", node.id}, {"mac", mac}, {"boot", "ramdisk"}});
  co_return script_reply(call.req, boot::ramdisk_script(b));
}

asio::awaitable<Result<http::Reply>> boot_script(ApiContext& ctx, Call& call) {
  const std::string& script = call.param("script");
  const std::string base = boot_base_url(ctx, call);
  if (script == "boot.ipxe") co_return script_reply(call.req, boot::chain_script(base));
  constexpr std::string_view kSuffix = ".ipxe";
  if (!script.ends_with(kSuffix)) co_return Error(Code::kNotFound, "no such boot script: " + script);
  std::optional<std::string> mac = normalize_mac(std::string_view(script).substr(0, script.size() - kSuffix.size()));
  if (!mac) co_return Error(Code::kNotFound, "no such boot script: " + script);

  Result<Port> port = co_await ctx.deps.db.run([&] { return ctx.deps.store.find_port_by_address(*mac); });
  if (!port) {
    if (port.error().code == Code::kNotFound) co_return Error(Code::kNotFound, "no node has a port with MAC " + *mac);
    co_return port.error();
  }
  Result<Node> node = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(port->node_id); });
  if (!node) {
    if (node.error().code == Code::kNotFound) co_return Error(Code::kNotFound, "no node has a port with MAC " + *mac);
    co_return node.error();
  }
  call.node_id = node->id;
  boot::BootChoice choice = boot::choose_boot(*node);
  if (choice.kind == boot::BootKind::kRamdisk) {
    Result<http::Reply> r = co_await ramdisk_reply(ctx, call, *node, *mac, base);
    co_return r;
  }
  if (choice.kind == boot::BootKind::kLocalDisk) {
    call.log.info("boot script served", {{"node", node->id}, {"mac", *mac}, {"boot", "local"}});
    co_return script_reply(call.req, boot::local_disk_script(node->boot_mode));
  }
  call.log.info("boot script served", {{"node", node->id}, {"mac", *mac}, {"boot", "retry"}, {"reason", choice.reason}});
  co_return script_reply(call.req, boot::retry_script(base, *mac, choice.reason));
}

}  // namespace

void add_boot_routes(RouteTable& t, ApiContext& ctx) {
  t.add({bhttp::verb::get, "/boot/{script}", Access::kPublic, {},
         [&ctx](Call& c) { return boot_script(ctx, c); }});
}

}  // namespace kiln::api
