// POST /v1/phone-home/{token}: cloud-init's phone_home (controller/tenancy/
// config_drive.h) bringing the deployed OS's SSH host public keys, which
// become the node's ssh_host_keys (shown to its tenant and staff, pinned by
// `kiln cluster up`'s known_hosts).
//
// Threat model. The route is public: the OS has no Kiln token. What it has
// is the deploy's one-time token (AgentAuthority::phone_home_token), which
// only that deploy's user-data carries. So:
//  - every token kilnd would not take (malformed, unknown node, a forgotten
//    deploy's, already used, wrong) and every caller not bound to the node's
//    DHCP lease (docs/agent-protocol.md, "Trust") gets the one 404, before
//    the body is looked at: a prober learns nothing, not even that a node
//    exists;
//  - a token names its node, so it can only ever write that node;
//  - the body is the OS's, i.e. the tenant's: bounded (kPhoneHomeMaxBody,
//    413 beyond), every key parsed by the one host key rule
//    (common/ssh_host_key.h), refused whole with a 400 naming the field, and
//    nothing is stored then; the instance_id must be the node's, so a post
//    meant for another deploy of it is refused;
//  - the addresses recorded after a good post are the DHCP leases of the
//    node's own ports (LeaseAddressLearner), never the caller's word: the
//    body carries no address, and the caller's address counts only as the
//    lease it is bound to;
//  - the first good post uses the token up (the store writes the keys only
//    while the node has none, in one transaction), so a replay is the 404
//    an unknown token gets. The next boot attempt (AgentBroker::forget)
//    drops the deploy's secret the token is derived from and the keys.
#include <algorithm>
#include <cctype>
#include <utility>  // before Asio (docs/coroutines.md)

#include "controller/agent/agent_authority.h"
#include "controller/agent/lease_address_learner.h"
#include "controller/api/boot_routes.h"
#include "controller/api/phone_home_input.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/tenancy/config_drive.h"

namespace kiln::api {
namespace {

Error unknown_token(const Call& call) {
  return Error(Code::kNotFound, "no such resource: " + std::string(call.req.target()));
}

// The media type of the request, lower case, without parameters.
std::string media_type(const http::Request& req) {
  auto it = req.find(bhttp::field::content_type);
  if (it == req.end()) return "";
  std::string v(it->value());
  v = v.substr(0, v.find(';'));
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return v;
}

// The node the token is for, only for a caller bound to its lease.
asio::awaitable<Result<Node>> phone_home_node(ApiContext& ctx, Call& call, const std::string& token) {
  Result<Node> node = co_await ctx.deps.agents->phone_home_node(token);
  if (!node) {
    if (node.error().code == Code::kNotFound) co_return unknown_token(call);
    co_return node.take_error();
  }
  Result<CallerBinding> bound = co_await bind_caller_to_node(ctx, call, node->id);
  if (!bound) co_return bound.take_error();
  if (*bound != CallerBinding::kBound) co_return unknown_token(call);
  co_return node;
}

asio::awaitable<Result<http::Reply>> phone_home(ApiContext& ctx, Call& call) {
  if (ctx.deps.agents == nullptr) co_return unknown_token(call);
  const std::string token = call.param("token");
  Result<Node> node = co_await phone_home_node(ctx, call, token);
  if (!node) co_return node.take_error();
  if (call.req.body().size() > kPhoneHomeMaxBody)
    co_return Error(Code::kPayloadTooLarge, "a phone-home body is at most 64 KiB");
  if (media_type(call.req) != "application/x-www-form-urlencoded")
    co_return Error(Code::kUnsupportedMedia, "use Content-Type application/x-www-form-urlencoded (cloud-init's phone_home)");
  Result<PhoneHomePost> post = parse_phone_home_form(call.req.body());
  if (!post) co_return post.take_error();
  // The seed's instance-id: the node's id (NoCloud seed) or the config
  // drive's "<node>-<allocation>".
  if (!post->instance_id ||
      (*post->instance_id != node->id && *post->instance_id != config_drive_instance_id(node->id, node->allocation)))
    co_return Error::invalid("instance_id", "is not this deploy's instance id");
  call.node_id = node->id;
  Result<Node> saved = co_await ctx.deps.agents->record_ssh_host_keys(*node, post->keys, post->hostname);
  if (!saved && saved.error().code == Code::kPreconditionFailed) {
    // The node changed between the check and the write (a heartbeat, a
    // power sync): check the token again against the node as it is now.
    node = co_await phone_home_node(ctx, call, token);
    if (!node) co_return node.take_error();
    saved = co_await ctx.deps.agents->record_ssh_host_keys(*node, post->keys, post->hostname);
  }
  if (!saved) {
    if (saved.error().code == Code::kNotFound || saved.error().code == Code::kPreconditionFailed)
      co_return unknown_token(call);
    co_return saved.take_error();
  }
  // The caller was just bound to one of the node's leases and its OS is up:
  // the moment to show the tenant where it is (an OS without kiln-agent
  // reports no address). Best effort: the keys are stored, and the sweep
  // tries again.
  if (ctx.deps.leased_addresses != nullptr) {
    Result<bool> learned = co_await ctx.deps.leased_addresses->learn(node->id);
    if (!learned)
      call.log.warn("dhcp addresses not recorded at phone-home", {{"node", node->id}, {"error", learned.error().message}});
  }
  co_return empty_reply(call.req);
}

}  // namespace

void add_phone_home_routes(RouteTable& t, ApiContext& ctx) {
  t.add({bhttp::verb::post, "/v1/phone-home/{token}", Access::kPublic, {},
         [&ctx](Call& c) { return phone_home(ctx, c); }});
}

}  // namespace kiln::api
