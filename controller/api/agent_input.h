#pragma once
// The bodies kiln-agent posts (docs/agent-protocol.md), read into the
// broker's types: pure functions of a parsed JSON document, so they are
// fuzzed (tests/fuzz/targets/agent_bodies.cc) apart from the routes, which
// check the agent's credential first and then call these.
//
// Unknown fields are ignored (an agent newer than kilnd still talks to it);
// a wrong type or a missing field is kInvalidArgument naming the JSON
// pointer (problem+json 400 with `errors`).
//
// What an agent says is untrusted (the OS-phase agent runs in the tenant's
// OS): every field that is stored, logged or shown is parsed and bounded
// here (common/machine_values.h), and a body with any field out of its rule
// is refused whole, so nothing of it is stored. The rules per field:
//   addresses   at most kMaxAgentAddresses, each parse_ip_address (no scope
//               id), kept in canonical text; loopback and link-local ones
//               dropped (is_loopback_or_link_local), duplicates dropped
//   node, busy, command_id, version, token, secret
//               check_printable, at most kMaxAgentText bytes: refused
//   error       free text (a tool's stderr): printable_field, cut to
//               kMaxAgentError bytes; cleaned rather than refused, so a
//               failure is still reported
//   result      an object, bounded by the body limit and parse_json's depth
//               limit; its contents are read by the step that asked for it

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
// The longest identifier-like field (node, busy, command_id, version, token,
// secret): ids are 36, tokens 64 characters.
inline constexpr std::size_t kMaxAgentText = 256;
// The longest error text kept from a result (longer is cut).
inline constexpr std::size_t kMaxAgentError = 4096;

// POST /v1/agent/lookup: macs (1+ MACs, normalized), phase (ramdisk|os),
// token (required in the ramdisk phase), secret, node, version, addresses
// (as the heartbeat's).
Result<AgentLookup> parse_agent_lookup(const nlohmann::json& body);

// Just what a lookup is authorised by (macs, phase, token, secret, node),
// every other field ignored: lets the route tell the node of an agent whose
// full body was refused (AgentBroker::record_refused_lookup). Errors as
// parse_agent_lookup's for those fields.
Result<AgentLookup> parse_agent_lookup_credential(const nlohmann::json& body);

struct AgentHeartbeatBody {
  std::string node;  // required
  std::string busy;  // the command being run, "" when idle
  // The OS-phase agent's IP addresses in canonical text, without loopback
  // and link-local ones; absent when the agent does not report them.
  std::optional<std::vector<std::string>> addresses;
};
// POST /v1/agent/heartbeat. /addresses/N names an element that is not an IP
// address (parse_ip_address's reason).
Result<AgentHeartbeatBody> parse_agent_heartbeat(const nlohmann::json& body);

// POST /v1/agent/results: node, command_id, status (ok|error) required;
// result an object, error a string.
Result<AgentResultPost> parse_agent_result(const nlohmann::json& body);

}  // namespace kiln::api
