#pragma once
// Internal to kiln_api: the routes of the boot chain and the image catalogue
// (controller/boot's HTTP side, docs/agent-protocol.md).
//
//   GET  /boot/{script}                 iPXE: boot.ipxe (generic) or <mac>.ipxe (no auth)
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

}  // namespace kiln::api
