#pragma once
// The bodies of Ironic's state-changing node requests, parsed into typed
// values before anything touches a node:
//
//   PUT /v1/nodes/{id}/states/provision  {"target", "configdrive"?, "clean_steps"?,
//                                         "deploy_steps"?, "rescue_password"?,
//                                         "disable_ramdisk"?}
//   PUT /v1/nodes/{id}/states/power      {"target", "timeout"?}
//   PUT /v1/nodes/{id}/maintenance       {"reason"?}
//
// Refusals follow Ironic 21.4's API (ironic/api/controllers/v1/node.py and
// utils.py): a target it does not know or a verb Kiln does not run is 400
// (InvalidStateRequested / InvalidParameterValue, which clients do not
// retry), a verb or field newer than the request's microversion is 406
// (check_allow_management_verbs), and every message names the field. The
// provision verbs map onto Kiln's engine (controller/model/state_machine.h),
// so whether a verb is allowed in the node's state is the engine's answer,
// given by the route.
//
// A configdrive object (API >= 1.56) becomes Kiln's config drive
// (controller/tenancy/config_drive.h, NoCloud): meta_data.public_keys are
// the SSH keys written into user-data (each checked as /v1 checks an
// allocation's keys), a hostname in meta_data (hostname, local-hostname,
// local_hostname or name, in that order) becomes local-hostname, user_data
// (a string, or an object or array written as JSON, as Ironic does) is the
// tenant part of user-data. Other meta_data keys are accepted and not
// carried (a NoCloud meta-data has no place for them; Metal3 sends uuid and
// its own names). network_data and vendor_data are refused unless they
// carry nothing (every member null or an empty list or object):
// Kiln's drive configures DHCP on the node's ports and has no vendor part,
// and silently dropping a static network layout would leave a node nobody
// can reach. A configdrive string (a gzipped ISO in base64, or its URL) is
// refused: Kiln builds the drive itself from typed parts.
//
// Pure functions, any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/conductor/workflow.h"  // OwnConfigDrive
#include "controller/model/state_machine.h"
#include "drivers/power.h"

namespace kiln::ironic {

// Why a request is refused: Ironic's status (400 or 406) and its message.
struct Refusal {
  int status = 400;
  std::string message;
};

// The most a config drive's parts may be (the drive itself is bounded by
// kConfigDriveMaxBytes when it is built; this refuses earlier, at the API).
inline constexpr std::size_t kMaxUserDataBytes = 1024 * 1024;
inline constexpr std::size_t kMaxPublicKeys = 64;

// What a configdrive object gives Kiln's config drive.
struct ConfigDriveParts {
  std::vector<std::string> ssh_keys;  // checked OpenSSH public keys, in the object's key order
  std::string hostname;               // "" = Kiln's default (the node's name)
  std::string user_data;              // "" = none
};

struct ProvisionRequest {
  std::string target;   // as sent ("active", "deleted", ...)
  ProvisionEvent verb;  // what Kiln's engine is asked
  std::optional<ConfigDriveParts> configdrive;
  nlohmann::json configdrive_object;  // as sent, when configdrive is set (kept in instance_info)
};

// Parses a provision body sent at microversion 1.`minor`. Refusals: 400 for
// a missing or non-string target, an unknown target, a target Kiln does not
// run (rebuild, rescue, unrescue, adopt, and clean: Kiln has no manual
// cleaning; its clean step names are checked first, an unknown one named),
// fields of the wrong type or for another target, a bad configdrive; 406 for
// a verb newer than `minor`.
std::optional<ProvisionRequest> parse_provision_request(const nlohmann::json& body, int minor, Refusal& why);

// Checks a configdrive value (`field` names it in messages, e.g.
// "configdrive").
std::optional<ConfigDriveParts> parse_configdrive(const nlohmann::json& value, int minor, Refusal& why);

// The Kiln image a deploy writes, from the node's instance_info: its
// image_source must be the name or UUID of an image registered with Kiln.
// 400 when missing, not a string, too long, or a URL (with what to do).
std::optional<std::string> deploy_image(const nlohmann::json& instance_info, Refusal& why);

// Where the provision route keeps a deploy's configdrive object: the
// node's instance_info, as Ironic keeps it (Node::ironic["instance_info"]).
inline constexpr std::string_view kConfigDriveKey = "configdrive";

// The node's own config drive for the conductor (ConductorOptions::
// own_config_drive): the configdrive object its last deploy through the
// Ironic API left in instance_info, parsed again (it was checked when the
// deploy was accepted; one that no longer parses is none). nullopt when the
// node has none.
std::optional<OwnConfigDrive> own_config_drive(const Node& node);

struct PowerRequest {
  std::string target;  // as sent
  PowerAction action;
  std::optional<int64_t> timeout;  // seconds, > 0; Kiln's drivers keep their own deadline
};

// Parses a power body at microversion 1.`minor`: 400 for an unknown target,
// "soft rebooting" (no Kiln driver has it), a timeout that is not a positive
// integer; 406 for soft targets or a timeout below 1.27.
std::optional<PowerRequest> parse_power_request(const nlohmann::json& body, int minor, Refusal& why);

// Parses a maintenance body (may be null: no body). 400 for a non-string
// reason or one over 1024 characters.
std::optional<std::string> parse_maintenance_reason(const nlohmann::json& body, Refusal& why);

}  // namespace kiln::ironic
