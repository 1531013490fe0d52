#include "controller/api/agent_input.h"

#include <algorithm>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include "common/machine_values.h"
#include "controller/api/json_input.h"
#include "controller/api/node_input.h"

namespace kiln::api {

namespace {

// An optional identifier-like string: check_printable within kMaxAgentText.
std::string read_text(ObjectReader& r, std::string_view key, std::vector<FieldError>& errors, bool required = false) {
  std::optional<std::string> v = r.string(key, required);
  if (!v) return {};
  Status ok = check_printable(*v, kMaxAgentText);
  if (!ok) {
    errors.push_back({r.pointer(key), ok.error().message});
    return {};
  }
  return std::move(*v);
}

// `addresses`: at most kMaxAgentAddresses, each an IP address kept in
// canonical text; loopback, link-local and repeated ones left out.
std::optional<std::vector<std::string>> read_addresses(ObjectReader& r, std::vector<FieldError>& errors) {
  std::optional<std::vector<std::string>> raw = r.string_array("addresses");
  if (!raw) return raw;
  if (raw->size() > kMaxAgentAddresses) {
    errors.push_back({"/addresses", "has more than " + std::to_string(kMaxAgentAddresses) + " addresses"});
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < raw->size(); ++i) {
    Result<std::string> a = parse_ip_address((*raw)[i]);
    if (!a) {
      errors.push_back({"/addresses/" + std::to_string(i), a.error().message});
      continue;
    }
    if (is_loopback_or_link_local(*a)) continue;
    if (std::find(out.begin(), out.end(), *a) == out.end()) out.push_back(std::move(*a));
  }
  return out;
}

// The credential part of a lookup (parse_agent_lookup_credential).
AgentLookup read_lookup_credential(ObjectReader& r, std::vector<FieldError>& errors) {
  AgentLookup out;
  std::optional<std::vector<std::string>> macs = r.string_array("macs");
  if (!r.has("macs") && errors.empty()) errors.push_back({"/macs", "is required"});
  out.node = read_text(r, "node", errors);
  out.token = read_text(r, "token", errors);
  out.secret = read_text(r, "secret", errors);
  out.phase = r.string("phase", true).value_or("");
  if (macs) {
    if (macs->empty()) errors.push_back({"/macs", "must name at least one MAC"});
    // The MACs a machine has are bounded by what fits in a body; each is
    // normalized, so none reaches the store as sent.
    for (std::size_t i = 0; i < macs->size(); ++i) {
      std::optional<std::string> m = normalize_mac((*macs)[i]);
      if (!m) {
        errors.push_back({"/macs/" + std::to_string(i), "must be a MAC address"});
        continue;
      }
      out.macs.push_back(*m);
    }
  }
  if (r.has("phase") && out.phase != "ramdisk" && out.phase != "os")
    errors.push_back({"/phase", "must be ramdisk or os"});
  if (out.phase == "ramdisk" && out.token.empty())
    errors.push_back({"/token", "is required in the ramdisk phase"});
  return out;
}

}  // namespace

Result<AgentLookup> parse_agent_lookup_credential(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  AgentLookup out = read_lookup_credential(r, errors);
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return out;
}

Result<AgentLookup> parse_agent_lookup(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  AgentLookup out = read_lookup_credential(r, errors);
  out.version = read_text(r, "version", errors);
  out.addresses = read_addresses(r, errors);
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return out;
}

Result<AgentHeartbeatBody> parse_agent_heartbeat(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  AgentHeartbeatBody out;
  out.node = read_text(r, "node", errors, true);
  out.busy = read_text(r, "busy", errors);
  out.addresses = read_addresses(r, errors);
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return out;
}

Result<AgentResultPost> parse_agent_result(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  AgentResultPost post;
  post.node = read_text(r, "node", errors, true);
  post.command_id = read_text(r, "command_id", errors, true);
  post.status = r.string("status", true).value_or("");
  if (const nlohmann::json* res = r.object("result")) post.result = *res;
  post.error = printable_field(r.string("error").value_or(""), kMaxAgentError);
  if (r.has("status") && post.status != "ok" && post.status != "error")
    errors.push_back({"/status", "must be ok or error"});
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return post;
}

}  // namespace kiln::api
