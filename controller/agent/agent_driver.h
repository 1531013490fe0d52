#pragma once
// In-band driver capabilities on kiln-agent (Ironic's "agent" inspect, clean,
// deploy interfaces), composed onto a BMC driver (redfish, ipmi) in main.cc:
// the BMC keeps power and boot-device control, the agent does the work on the
// node. Each capability turns one call into one agent command through the
// AgentBroker and waits for its result:
//
//   inspect   "inspect"      -> the inventory (required keys checked)
//   clean     "wipe"         {"full_overwrite": false}
//   deploy    "write_image"  url/sha256/size/format of the node's os image
//   validate  "validate"     {"plan": "full" (burn_in) | "quick", "profile": {...}}
//             then, for "quick" when the profile wants it and the node's own
//             plan passed, nccl_multinode across its allocation (the
//             CollectiveRendezvous), appended to the report
//
// A driver that inspects out of band (redfish) keeps that for nodes without a
// port: the agent can only find its node by MAC.

#include <memory>
#include <string>
#include <vector>

#include "common/blocking_pool.h"
#include "controller/agent/agent_broker.h"
#include "controller/agent/collective_rendezvous.h"
#include "controller/store/store.h"
#include "drivers/driver.h"

namespace kiln {

// The top-level keys schemas/inventory.schema.json requires.
const std::vector<std::string>& inventory_required_keys();
// kUnprocessable naming the missing keys when `inventory` lacks any.
Status check_inventory(const nlohmann::json& inventory);

// The write_image arguments for `image` (docs/agent-protocol.md). `os_secret`
// (the deploy's secret) and `tls_sha256` (kilnd's certificate pin, "" for
// plain HTTP) are what the agent leaves on the disk for the OS's agent;
// empty ones are left out.
nlohmann::json write_image_args(const Image& image, const std::string& boot_url, const std::string& os_secret = "",
                                const std::string& tls_sha256 = "");

// Gives `driver` the broker-backed agent, inspect, clean, deploy and validate
// capabilities. `broker`, `store`, `db` and `rendezvous` (nullable: no
// nccl_multinode) must outlive the driver.
void add_agent_capabilities(Driver& driver, AgentBroker& broker, NodeStore& store, BlockingPool& db,
                            CollectiveRendezvous* rendezvous = nullptr);

}  // namespace kiln
