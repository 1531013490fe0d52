#pragma once
// Cloud-init NoCloud documents for a virtual node (pure functions).
//
// The domain's SMBIOS system serial says "ds=nocloud;s=<boot url>/v1/nocloud/<node>/",
// so cloud-init in a stock cloud image fetches meta-data, user-data and
// vendor-data from kilnd (controller/api/nocloud_routes.cc). user-data
// installs the tenant's SSH keys and starts kiln-agent in the os phase, so
// the agent looks the node up by MAC and the deploy's wait_boot step ends.
//
// Threat model: these routes are unauthenticated (a guest has no token
// before it boots) and answer only while the node is deploying or
// validating; any other time they are 404. The documents carry public SSH
// keys, the node id and kilnd's URL: nothing secret (no agent token — the
// os-phase lookup is authorised by the node's state and MAC, per
// docs/agent-protocol.md). Anyone on the guest network who can guess a
// node's UUID while it deploys can read the same public facts.

#include <string>
#include <vector>

#include "controller/model/node.h"

namespace kiln {

std::string nocloud_meta_data(const Node& node);
std::string nocloud_user_data(const Node& node, const std::vector<std::string>& ssh_keys,
                              const std::string& boot_url);
std::string nocloud_vendor_data();
// The node's SSH keys (bmc.options.ssh_keys, set at creation).
std::vector<std::string> node_ssh_keys(const Node& node);

}  // namespace kiln
