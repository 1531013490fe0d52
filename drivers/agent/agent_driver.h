#pragma once
// In-band driver capabilities on kiln-agent (Ironic's "agent" inspect, clean,
// deploy interfaces), composed onto a BMC driver (redfish, ipmi) or the
// libvirt driver: the BMC keeps power and boot-device control, the agent does
// the work on the node. Each capability turns one call into one agent command
// and waits for its result:
//
//   inspect   "inspect"      -> the inventory (required keys checked)
//   clean     "wipe"         {"full_overwrite": false}
//   deploy    "write_image"  the arguments the channel gives for the image
//             "write_config_drive" {"iso_base64"} (the disk write_image wrote)
//   validate  "validate"     {"plan": "full" (burn_in) | "quick", "profile": {...}}
//             then whatever the MultinodeValidation adds across the node's
//             allocation (nccl_multinode), appended to the report
//
// A driver that inspects out of band (redfish) keeps that for nodes without a
// port: the agent can only find its node by MAC.
//
// The driver reaches the agents only through AgentChannel, which the
// controller implements (controller/agent/agent_channel.h: the AgentBroker,
// the image catalogue); nothing here knows the store or the protocol's
// transport. Contract of the commands: docs/agent-protocol.md.
//
// Errors are the channel's, passed through: kConflict when the operation lost
// the node, kUnavailable when kilnd shuts down, kDriverError when the agent
// reports a failure; inspect adds kUnprocessable for an inventory without the
// schema's required keys.

#include <cstddef>
#include <memory>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/result.h"
#include "drivers/driver.h"

namespace kiln {

// The controller's side of the agent protocol, as the in-band capabilities
// need it. Called from any I/O thread; implementations must not block.
class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  // A new boot attempt: forgets the node's agent (sessions, boot token, os
  // secret, outstanding command).
  virtual asio::awaitable<Status> forget(std::string node_id) = 0;
  // Until an agent of `phase` has looked up for the node. kConflict when
  // `still_held` turns false, kUnavailable on shutdown.
  virtual asio::awaitable<Status> wait_for_agent(std::string node_id, AgentPhase phase, HeldFn still_held) = 0;
  // Sends command `name` with `args` to the node's agent and waits for its
  // result object. kDriverError "<name> failed: <agent's error>" when the
  // agent reports an error; kConflict / kUnavailable as wait_for_agent.
  virtual asio::awaitable<Result<nlohmann::json>> run_command(std::string node_id, std::string name,
                                                              nlohmann::json args, HeldFn still_held) = 0;
  // The write_image arguments that put `image` (id or name) on the node's
  // disk. Errors name the image (kNotFound, kUnprocessable when it is not an
  // os image).
  virtual asio::awaitable<Result<nlohmann::json>> write_image_args(std::string node_id, std::string image) = 0;
};

// What validation adds across a node's allocation after the node's own plan
// (nccl_multinode). Called from any I/O thread.
class MultinodeValidation {
 public:
  virtual ~MultinodeValidation() = default;
  // Whether the node's own `plan` report calls for the multi-node round (no I/O).
  virtual bool due(const DriverTarget& t, ValidationPlan plan, const nlohmann::json& report) const = 0;
  // Runs the node's part of the round and returns `report` with its check
  // added. kConflict (the node was lost), kUnavailable (shutdown).
  virtual asio::awaitable<Result<nlohmann::json>> add_round(DriverTarget t, nlohmann::json report) = 0;
};

// The top-level keys schemas/inventory.schema.json requires.
const std::vector<std::string>& inventory_required_keys();
// The most network interfaces an inventory may list (a GPU server has a
// dozen or two; a NIC with SR-IOV functions exposed to the ramdisk, more).
inline constexpr std::size_t kMaxInventoryNics = 1024;
// kUnprocessable naming the missing keys when `inventory` lacks any, a
// member of the wrong shape, more than kMaxInventoryNics nics, or a nic
// whose name is not an interface name (kiln::parse_interface_name): the
// inspection then fails with that reason and nothing of it is stored.
Status check_inventory(const nlohmann::json& inventory);

// The longest string kept in an agent's inventory (longer is cut).
inline constexpr std::size_t kMaxInventoryText = 512;
// Cleans every string value in an agent's inventory with
// kiln::printable_field (common/machine_values.h): what the ramdisk read from
// SMBIOS, sysfs and the NICs is firmware's text (vendor, model, serial,
// interface and disk names) and reaches the node's inventory, a tenant's view
// and the files the CLI writes. Cleaned rather than refused: a stray byte in
// a DIMM's part number must not fail an inspection. Keys are the agent's own
// and left as they are.
void clean_inventory_strings(nlohmann::json& inventory);

// Gives `driver` the agent, inspect (in band, keeping its out-of-band one for
// nodes without a port), clean, deploy and validate capabilities. The
// capabilities share `channel` and `multinode` (null: no multi-node round).
void add_agent_capabilities(Driver& driver, std::shared_ptr<AgentChannel> channel,
                            std::shared_ptr<MultinodeValidation> multinode = nullptr);

}  // namespace kiln
