// The os-phase agent's seed (agent/deploy/seed_env.h): KEY=VALUE text that
// comes from a disk's last 4 KiB or a NoCloud seed, so from whoever had the
// disk or the network before. What parses must render and parse back to the
// same seed, with its secret and pin lowercase hex.
#include <cstdint>
#include <string>
#include <string_view>

#include "agent/deploy/seed_env.h"

namespace {
bool hex_or_empty(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Result<kiln::agent::AgentSeed> seed = kiln::agent::parse_seed_env(text);
  if (!seed) {
    if (seed.error().fields.empty()) __builtin_trap();  // a refusal names the key
    return 0;
  }
  if (!hex_or_empty(seed->os_secret) || !hex_or_empty(seed->tls_sha256)) __builtin_trap();
  kiln::Result<kiln::agent::AgentSeed> again = kiln::agent::parse_seed_env(kiln::agent::render_seed_env(*seed));
  if (!again || again->api_url != seed->api_url || again->node_id != seed->node_id ||
      again->os_secret != seed->os_secret || again->tls_sha256 != seed->tls_sha256) {
    __builtin_trap();
  }
  return 0;
}
