#pragma once
// Cloud-init NoCloud documents for a virtual node (pure functions).
//
// The domain's SMBIOS system serial says "ds=nocloud-net;s=<boot url>/v1/nocloud/<node>/",
// so cloud-init in a stock cloud image fetches meta-data, user-data and
// vendor-data from kilnd (controller/api/hosts_routes.cc). user-data
// installs the node's SSH keys and, for a member of an allocation, the
// allocation's (merged_ssh_keys) and the tenant's own user data, and starts kiln-agent in the os phase, so
// the agent looks the node up by MAC and the deploy's wait_boot step ends.
//
// Threat model: these routes are unauthenticated (a guest has no token
// before it boots) and answer only while the node is deploying or validating,
// and only to the address kilnd's DHCP leased to one of the node's MACs when
// lease binding is on (docs/agent-protocol.md, "Trust"); anyone else gets the
// 404 an unknown node gets. user-data and kiln-agent.env carry the deploy's
// os secret (the credential of the os-phase lookup) and kilnd's certificate
// pin; the rest (public SSH keys, the node id, kilnd's URL) is not secret.

#include <string>
#include <vector>

#include "controller/model/node.h"

namespace kiln {

std::string nocloud_meta_data(const Node& node);
// What the os-phase kiln-agent reads (--seed-file, agent/deploy/agent_seed.h):
// KEY=VALUE lines KILN_API, KILN_NODE, KILN_PHASE, KILN_OS_SECRET and, when
// kilnd serves HTTPS, KILN_TLS_SHA256. Served as the seed's kiln-agent.env
// and written to /etc/kiln/agent.env (0600) by user-data.
struct NoCloudAgent {
  std::string boot_url;
  std::string os_secret;
  std::string tls_sha256;  // "" for plain HTTP
  // The deploy's one-time phone-home URL (config_drive.h, "phone_home");
  // "" writes no phone_home block.
  std::string phone_home_url;
};
std::string nocloud_agent_env(const Node& node, const NoCloudAgent& agent);
// With the tenant's own user data (the allocation's user_data, "" for none)
// combined as on the config drive (config_drive.h, "Combining user data").
std::string nocloud_user_data(const Node& node, const std::vector<std::string>& ssh_keys,
                              const NoCloudAgent& agent, const std::string& tenant_user_data = "");
std::string nocloud_vendor_data();
// The node's SSH keys (bmc.options.ssh_keys, set at creation).
std::vector<std::string> node_ssh_keys(const Node& node);
// `keys` followed by those of `more` not already in it, in order (an
// allocation member's seed: the node's keys and its allocation's).
std::vector<std::string> merged_ssh_keys(std::vector<std::string> keys, const std::vector<std::string>& more);

}  // namespace kiln
