#include "agent/runtime/replies.h"

#include <cmath>

#include "common/json_text.h"

namespace kiln::agent {

using nlohmann::json;

namespace {

std::optional<json> object_body(std::string_view body) {
  Result<json> j = parse_json(body);
  if (!j || !j->is_object()) return std::nullopt;
  return std::move(*j);
}

// `o[key]` when it is a string, else "".
std::string string_at(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<double> interval_at(const json& o) {
  auto it = o.find("heartbeat_interval_s");
  if (it == o.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

std::optional<LookupReply> read_lookup_reply(std::string_view body) {
  std::optional<json> j = object_body(body);
  if (!j) return std::nullopt;
  LookupReply r;
  auto session = j->find("session");
  if (session == j->end() || !session->is_string()) return std::nullopt;
  r.session = session->get<std::string>();
  if (auto node = j->find("node"); node != j->end() && node->is_object()) {
    r.node_id = string_at(*node, "id");
    r.provision_state = string_at(*node, "provision_state");
  }
  r.heartbeat_interval_s = interval_at(*j);
  return r;
}

std::optional<HeartbeatReply> read_heartbeat_reply(std::string_view body) {
  std::optional<json> j = object_body(body);
  if (!j) return std::nullopt;
  HeartbeatReply r;
  r.heartbeat_interval_s = interval_at(*j);
  if (auto c = j->find("command"); c != j->end() && c->is_object()) {
    AgentCommand cmd;
    cmd.id = string_at(*c, "id");
    cmd.name = string_at(*c, "name");
    if (auto args = c->find("args"); args != c->end() && args->is_object()) cmd.args = *args;
    if (!cmd.id.empty()) r.command = std::move(cmd);
  }
  return r;
}

std::chrono::milliseconds clamp_interval(double seconds, std::chrono::milliseconds lo,
                                         std::chrono::milliseconds hi) {
  // Compared as doubles before any conversion: casting NaN, an infinity or
  // 1e300 to an integer is undefined behaviour.
  if (std::isnan(seconds)) return hi;
  const double ms = seconds * 1000.0;
  if (ms <= static_cast<double>(lo.count())) return lo;
  if (ms >= static_cast<double>(hi.count())) return hi;
  return std::chrono::milliseconds(static_cast<long long>(ms));
}

std::string problem_detail(std::string_view body) {
  if (std::optional<json> j = object_body(body)) {
    if (std::string d = string_at(*j, "detail"); !d.empty()) return d;
    if (std::string t = string_at(*j, "title"); !t.empty()) return t;
  }
  return to_valid_utf8(body.substr(0, 200));
}

}  // namespace kiln::agent
