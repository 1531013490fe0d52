#include "controller/api/agent_input.h"

#include <string>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/ip/address.hpp>

#include "controller/api/json_input.h"
#include "controller/api/node_input.h"

namespace kiln::api {

namespace {

// `addresses`: at most kMaxAgentAddresses IP literals.
std::optional<std::vector<std::string>> read_addresses(ObjectReader& r, std::vector<FieldError>& errors) {
  std::optional<std::vector<std::string>> addresses = r.string_array("addresses");
  if (!addresses) return addresses;
  if (addresses->size() > kMaxAgentAddresses)
    errors.push_back({"/addresses", "has more than " + std::to_string(kMaxAgentAddresses) + " addresses"});
  for (std::size_t i = 0; i < addresses->size() && i < kMaxAgentAddresses; ++i) {
    boost::system::error_code ec;
    boost::asio::ip::make_address((*addresses)[i], ec);
    if (ec) errors.push_back({"/addresses/" + std::to_string(i), "is not an IP address"});
  }
  return addresses;
}

}  // namespace

Result<AgentLookup> parse_agent_lookup(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  AgentLookup out;
  std::optional<std::vector<std::string>> macs = r.string_array("macs");
  if (!r.has("macs") && errors.empty()) errors.push_back({"/macs", "is required"});
  out.node = r.string("node").value_or("");
  out.token = r.string("token").value_or("");
  out.secret = r.string("secret").value_or("");
  out.phase = r.string("phase", true).value_or("");
  out.version = r.string("version").value_or("");
  out.addresses = read_addresses(r, errors);
  if (macs) {
    if (macs->empty()) errors.push_back({"/macs", "must name at least one MAC"});
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
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return out;
}

Result<AgentHeartbeatBody> parse_agent_heartbeat(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  AgentHeartbeatBody out;
  out.node = r.string("node", true).value_or("");
  out.busy = r.string("busy").value_or("");
  out.addresses = read_addresses(r, errors);
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return out;
}

Result<AgentResultPost> parse_agent_result(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  AgentResultPost post;
  post.node = r.string("node", true).value_or("");
  post.command_id = r.string("command_id", true).value_or("");
  post.status = r.string("status", true).value_or("");
  if (const nlohmann::json* res = r.object("result")) post.result = *res;
  post.error = r.string("error").value_or("");
  if (r.has("status") && post.status != "ok" && post.status != "error")
    errors.push_back({"/status", "must be ok or error"});
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return post;
}

}  // namespace kiln::api
