#pragma once
// Virtual nodes at the API: POST /v1/nodes with "kind": "virtual",
// and the /v1/hosts + /v1/nocloud routes (hosts_routes.cc).
//
// A body with kind virtual and no `bmc` block comes here (one with a bmc
// block is enrolled like any node). A virtual node is made from a profile with a `virtual` flavour block and,
// optionally, the host it must run on. It starts `available` with no domain
// and no capacity held (bmc.driver libvirt); deploy places and boots it.
//   {"kind": "virtual", "profile": "cpu-lab", "host": "lab-host",
//    "name": "...", "ssh_keys": ["ssh-ed25519 ..."], "boot_mode": "uefi|bios",
//    "traits": [...], "tenant": "..."}
// 400 naming /profile (unknown, or no virtual flavour) or /host (unknown).

#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "controller/api/route_table.h"

namespace kiln::api {

asio::awaitable<Result<http::Reply>> create_virtual_node(ApiContext& ctx, Call& call, nlohmann::json body);
void add_host_routes(RouteTable& t, ApiContext& ctx);
// Whether the virtual node's flavour fits on its host (or any host) now:
// kConflict naming what is short on each. Advisory (the booking itself is
// transactional at deploy); kInvalidArgument naming /profile without a flavour.
asio::awaitable<Status> check_virtual_fit(ApiContext& ctx, Node node);

}  // namespace kiln::api
