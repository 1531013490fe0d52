#pragma once
// Internal to kiln_api: the routes of the boot chain and the image catalogue
// (controller/boot's HTTP side, docs/agent-protocol.md).
//
//   GET  /boot/{script}                 iPXE: boot.ipxe (generic) or <mac>.ipxe (no auth;
//                                       bound to the MAC's DHCP lease; 404 when kilnd
//                                       has nothing to bind to)
//   POST/GET /v1/images, GET/DELETE /v1/images/{id}       staff
//   GET/HEAD /v1/images/{id}/content, /v1/images/{id}/kernel
//        Range, ETag; ramdisk images public, os images staff or the agent
//        session of a node deploying that image

#include "controller/api/route_table.h"

namespace kiln::api {

void add_image_routes(RouteTable& t, ApiContext& ctx);
void add_boot_routes(RouteTable& t, ApiContext& ctx);

// The boot URL: --boot-url when configured, else http(s)://<Host header>.
std::string boot_base_url(const ApiContext& ctx, const Call& call);

// Lease binding (docs/agent-protocol.md, "Trust"): whether the caller may
// have per-node boot data for a node owning `macs`.
enum class CallerBinding {
  kBound,      // the caller's address is the one DHCP leased (unexpired) to one
               // of `macs`, or the operator turned binding off
  kNotBound,   // it is not, or the lease file cannot be read or parsed (fail
               // closed; a warning is logged)
  kNoBinding,  // kilnd has nothing to bind to (BootSettings::binding kUnbound,
               // or no boot settings at all): refuse per-node boot data
};
// Reads the lease file on the BlockingPool.
asio::awaitable<CallerBinding> bind_caller(ApiContext& ctx, Call& call, std::vector<std::string> macs);
// bind_caller with the MACs of `node_id`'s ports (what a NoCloud seed or a
// phone-home is bound to). Errors: the store's, reading the ports.
asio::awaitable<Result<CallerBinding>> bind_caller_to_node(ApiContext& ctx, Call& call, std::string node_id);

}  // namespace kiln::api
