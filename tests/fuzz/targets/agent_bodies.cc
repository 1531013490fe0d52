// The bodies kiln-agent posts (controller/api/agent_input.h) as the routes
// read them: parse_json (depth 64), then the lookup, heartbeat or result
// reader (first byte). An accepted lookup names only normalized MACs and a
// known phase.
#include <cstdint>
#include <string_view>

#include "common/json_text.h"
#include "controller/api/agent_input.h"

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
      break;
    }
    case 1: (void)kiln::api::parse_agent_heartbeat(*body); break;
    case 2: {
      kiln::Result<kiln::AgentResultPost> r = kiln::api::parse_agent_result(*body);
      if (r && r->status != "ok" && r->status != "error") __builtin_trap();
      break;
    }
  }
  return 0;
}
