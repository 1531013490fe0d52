#pragma once
// The bodies kiln-agent posts (docs/agent-protocol.md), read into the
// broker's types: pure functions of a parsed JSON document, so they are
// fuzzed (tests/fuzz/targets/agent_bodies.cc) apart from the routes, which
// check the agent's credential first and then call these.
//
// Unknown fields are ignored (an agent newer than kilnd still talks to it);
// a wrong type or a missing field is kInvalidArgument naming the JSON
// pointer (problem+json 400 with `errors`).

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/agent/agent_broker.h"

namespace kiln::api {

// The most addresses an agent may report (lookup or heartbeat `addresses`).
inline constexpr std::size_t kMaxAgentAddresses = 32;

// POST /v1/agent/lookup: macs (1+ MACs, normalized), phase (ramdisk|os),
// token (required in the ramdisk phase), secret, node, version, addresses
// (as the heartbeat's).
Result<AgentLookup> parse_agent_lookup(const nlohmann::json& body);

struct AgentHeartbeatBody {
  std::string node;  // required
  std::string busy;  // the command being run, "" when idle
  // The OS-phase agent's IP addresses (IPv4 or IPv6 literals, at most
  // kMaxAgentAddresses); absent when the agent does not report them.
  std::optional<std::vector<std::string>> addresses;
};
// POST /v1/agent/heartbeat. /addresses/N names an element that is not an IP
// address.
Result<AgentHeartbeatBody> parse_agent_heartbeat(const nlohmann::json& body);

// POST /v1/agent/results: node, command_id, status (ok|error) required;
// result an object, error a string.
Result<AgentResultPost> parse_agent_result(const nlohmann::json& body);

}  // namespace kiln::api
