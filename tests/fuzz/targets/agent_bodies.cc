// The bodies kiln-agent posts (controller/api/agent_input.h) as the routes
// read them: parse_json (depth 64), then the lookup, heartbeat or result
// reader (first byte). An accepted lookup names only normalized MACs and a
// known phase; accepted addresses are canonical (parse to themselves), never
// loopback or link-local, at most kMaxAgentAddresses; every accepted text
// field is printable and bounded.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_text.h"
#include "common/machine_values.h"
#include "controller/api/agent_input.h"

namespace {

void check_addresses(const std::optional<std::vector<std::string>>& addresses) {
  if (!addresses) return;
  if (addresses->size() > kiln::api::kMaxAgentAddresses) __builtin_trap();
  for (const std::string& a : *addresses) {
    kiln::Result<std::string> again = kiln::parse_ip_address(a);
    if (!again || *again != a || kiln::is_loopback_or_link_local(a)) __builtin_trap();
  }
}

void check_text(const std::string& s) {
  if (!kiln::check_printable(s, kiln::api::kMaxAgentText)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  kiln::Result<nlohmann::json> body = kiln::parse_json(text);
  if (!body) return 0;
  switch (data[0] % 3) {
    case 0: {
      kiln::Result<kiln::AgentLookup> l = kiln::api::parse_agent_lookup(*body);
      if (!l) break;
      if (l->macs.empty() || (l->phase != "ramdisk" && l->phase != "os")) __builtin_trap();
      for (const std::string& m : l->macs)
        if (m.size() != 17) __builtin_trap();
      check_addresses(l->addresses);
      for (const std::string* t : {&l->node, &l->token, &l->secret, &l->version}) check_text(*t);
      break;
    }
    case 1: {
      kiln::Result<kiln::api::AgentHeartbeatBody> hb = kiln::api::parse_agent_heartbeat(*body);
      if (!hb) break;
      check_addresses(hb->addresses);
      check_text(hb->node);
      check_text(hb->busy);
      break;
    }
    case 2: {
      kiln::Result<kiln::AgentResultPost> r = kiln::api::parse_agent_result(*body);
      if (!r) break;
      if (r->status != "ok" && r->status != "error") __builtin_trap();
      check_text(r->node);
      check_text(r->command_id);
      if (!kiln::check_printable(r->error, kiln::api::kMaxAgentError)) __builtin_trap();
      break;
    }
  }
  return 0;
}
