// GET /boot/{script}: the iPXE scripts of the boot chain (no auth: iPXE has
// no credentials). "boot.ipxe" is the generic script dnsmasq hands iPXE; it
// chains "<mac>.ipxe", which is chosen from the node owning that MAC
// (controller/boot/boot_script.h has the table).
//
// Trust (docs/agent-protocol.md): a per-MAC script is served only to the
// address DHCP leased to that MAC (404 to everyone when kilnd has nothing to
// bind to, unless the operator turned binding off), and a ramdisk script
// carries the token of the node's current boot attempt (the same one on every
// fetch, never a replacement). Everyone else, an unknown MAC, and a node with
// nothing to boot get one byte-identical "nothing to boot" script; why is in
// kilnd's log only.

#include <boost/asio/ip/address.hpp>

#include "controller/agent/agent_authority.h"
#include "controller/api/boot_routes.h"
#include "controller/api/node_input.h"
#include "controller/api/query.h"
#include "controller/boot/boot_script.h"
#include "controller/boot/dhcp_leases.h"

namespace kiln::api {

std::string boot_base_url(const ApiContext& ctx, const Call& call) {
  if (ctx.deps.boot != nullptr && !ctx.deps.boot->boot_url.empty()) return ctx.deps.boot->boot_url;
  std::string host(call.req[bhttp::field::host]);
  if (host.empty()) host = "localhost";
  return std::string(call.info.tls ? "https://" : "http://") + host;
}

namespace {

// The peer's address from RequestInfo::remote ("ip:port" or "[v6]:port"),
// an IPv4-mapped IPv6 address as IPv4.
std::optional<boost::asio::ip::address> peer_address(const std::string& remote) {
  std::size_t colon = remote.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  std::string host = remote.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  boost::system::error_code ec;
  boost::asio::ip::address a = boost::asio::ip::make_address(host, ec);
  if (ec) return std::nullopt;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return boost::asio::ip::address(boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, a.to_v6()));
  return a;
}

struct LeaseCheck {
  bool held = false;
  std::string problem;  // the lease file could not be used
};

LeaseCheck check_leases(const std::string& path, const std::vector<std::string>& macs,
                        const boost::asio::ip::address& peer, int64_t now_s) {
  boot::LeaseFile file(path);
  LeaseCheck out;
  for (const std::string& mac : macs) {
    Result<std::optional<std::string>> ip = file.address_of(mac, now_s);
    if (!ip) {
      out.problem = ip.error().message;
      return out;
    }
    if (!*ip) continue;
    boost::system::error_code ec;
    boost::asio::ip::address leased = boost::asio::ip::make_address(**ip, ec);
    if (!ec && leased == peer) {
      out.held = true;
      return out;
    }
  }
  return out;
}

}  // namespace

asio::awaitable<CallerBinding> bind_caller(ApiContext& ctx, Call& call, std::vector<std::string> macs) {
  const boot::BootSettings* boot = ctx.deps.boot;
  if (boot == nullptr || boot->binding == boot::LeaseBinding::kUnbound) co_return CallerBinding::kNoBinding;
  if (boot->binding == boot::LeaseBinding::kOff) co_return CallerBinding::kBound;
  std::optional<boost::asio::ip::address> peer = peer_address(call.info.remote);
  if (!peer) co_return CallerBinding::kNotBound;
  const std::string path = boot->lease_file;
  const int64_t now_s = ctx.deps.clock.now_ms() / 1000;
  const boost::asio::ip::address who = *peer;
  LeaseCheck check = co_await ctx.deps.db.run([&] { return check_leases(path, macs, who, now_s); });
  if (!check.problem.empty())
    call.log.warn("DHCP leases unreadable: serving nothing bound to a lease", {{"reason", check.problem}});
  co_return check.held ? CallerBinding::kBound : CallerBinding::kNotBound;
}

asio::awaitable<Result<CallerBinding>> bind_caller_to_node(ApiContext& ctx, Call& call, std::string node_id) {
  // A node has a handful of ports; 100 is far past any real one.
  Result<std::vector<Port>> ports =
      co_await ctx.deps.db.run([&] { return ctx.deps.store.list_ports(node_id, 100, ""); });
  if (!ports) co_return ports.take_error();
  std::vector<std::string> macs;
  for (const Port& p : *ports) macs.push_back(p.address);
  CallerBinding bound = co_await bind_caller(ctx, call, std::move(macs));
  co_return bound;
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

// The one answer for every caller kilnd has nothing for (see the top).
http::Reply nothing_to_boot(Call& call, const std::string& base, const std::string& mac, const std::string& why) {
  call.log.info("boot script served", {{"mac", mac}, {"boot", "nothing"}, {"reason", why}});
  return script_reply(call.req, boot::nothing_to_boot_script(base, mac));
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
    co_return nothing_to_boot(call, base, mac, why);
  }
  Result<std::string> token = co_await agents->boot_token(node);
  if (!token) co_return token.error();
  boot::RamdiskBoot b;
  b.boot_url = base;
  b.image = ramdisk->id;
  b.kernel_args = ramdisk->kernel_args;
  b.node_id = node.id;
  b.token = *token;
  b.mac = mac;
  if (ctx.deps.boot != nullptr) b.tls_sha256 = ctx.deps.boot->tls_sha256;
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

  // The lease first: a caller that does not hold it learns nothing, not even
  // whether the MAC is known. A kilnd with nothing to bind to serves no
  // per-MAC script at all (fail closed; kilnd warned at start-up).
  std::vector<std::string> macs = {*mac};
  CallerBinding bound = co_await bind_caller(ctx, call, macs);
  if (bound == CallerBinding::kNoBinding) {
    call.log.info("boot script refused", {{"mac", *mac}, {"reason", "no lease binding configured"}});
    co_return Error(Code::kNotFound, "no such boot script: " + script);
  }
  if (bound == CallerBinding::kNotBound)
    co_return nothing_to_boot(call, base, *mac, "the caller " + call.info.remote + " does not hold the MAC's DHCP lease");

  Result<Port> port = co_await ctx.deps.db.run([&] { return ctx.deps.store.find_port_by_address(*mac); });
  if (!port) {
    if (port.error().code == Code::kNotFound) co_return nothing_to_boot(call, base, *mac, "unknown MAC");
    co_return port.error();
  }
  Result<Node> node = co_await ctx.deps.db.run([&] { return ctx.deps.store.get_node(port->node_id); });
  if (!node) {
    if (node.error().code == Code::kNotFound) co_return nothing_to_boot(call, base, *mac, "unknown MAC");
    co_return node.error();
  }
  boot::BootChoice choice = boot::choose_boot(*node);
  if (choice.kind == boot::BootKind::kRamdisk) {
    call.node_id = node->id;
    Result<http::Reply> r = co_await ramdisk_reply(ctx, call, *node, *mac, base);
    co_return r;
  }
  if (choice.kind == boot::BootKind::kLocalDisk) {
    call.node_id = node->id;
    call.log.info("boot script served", {{"node", node->id}, {"mac", *mac}, {"boot", "local"}});
    co_return script_reply(call.req, boot::local_disk_script(node->boot_mode));
  }
  co_return nothing_to_boot(call, base, *mac, choice.reason);
}

}  // namespace

void add_boot_routes(RouteTable& t, ApiContext& ctx) {
  t.add({bhttp::verb::get, "/boot/{script}", Access::kPublic, {},
         [&ctx](Call& c) { return boot_script(ctx, c); }});
}

}  // namespace kiln::api
