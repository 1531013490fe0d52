#pragma once
// What the agent reads from kilnd's replies (docs/agent-protocol.md): the
// lookup answer, the heartbeat answer and a problem+json detail for logs.
//
// Whoever answers on the provisioning network is not trusted to send sane
// JSON (a spoofed kilnd, a proxy's error page, a truncated body), so these
// are pure functions of the body's bytes: the bounded parser (common/
// json_text.h), every field type-checked, a wrong or missing field read as
// absent. They never throw. Fuzzed by tests/fuzz/targets/agent_replies.cc.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln::agent {

// A 200 lookup reply. nullopt when the body has no string `session`.
struct LookupReply {
  std::string session;
  std::string node_id;          // node.id, "" when absent
  std::string provision_state;  // node.provision_state, "" when absent
  std::optional<double> heartbeat_interval_s;
};
std::optional<LookupReply> read_lookup_reply(std::string_view body);

// A command kilnd asks the agent to run. `id` is non-empty; `name` may be
// "" (the runner then answers with an unknown-command result, so kilnd stops
// repeating it); `args` is an object (empty when absent or not an object).
struct AgentCommand {
  std::string id;
  std::string name;
  nlohmann::json args = nlohmann::json::object();
};

// A 200 heartbeat reply. nullopt when the body is not a JSON object.
struct HeartbeatReply {
  std::optional<double> heartbeat_interval_s;
  std::optional<AgentCommand> command;  // absent unless command.id is a non-empty string
};
std::optional<HeartbeatReply> read_heartbeat_reply(std::string_view body);

// The interval kilnd asked for, clamped to [lo, hi]. NaN, infinities and
// values past hi are hi; negative ones lo: a reply cannot make the agent spin
// or go silent.
std::chrono::milliseconds clamp_interval(double seconds, std::chrono::milliseconds lo,
                                         std::chrono::milliseconds hi);

// `detail`, else `title`, of a problem+json body; else the body's first 200
// bytes, made valid UTF-8 so a log line never carries garbage.
std::string problem_detail(std::string_view body);

}  // namespace kiln::agent
