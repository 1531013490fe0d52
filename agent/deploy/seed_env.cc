#include "agent/deploy/seed_env.h"

namespace kiln::agent {

namespace {

bool plain_value(std::string_view v) {
  for (char c : v)
    if (static_cast<unsigned char>(c) <= 0x20 || c == '"' || c == '\'' || c == '\\' || c == 0x7f) return false;
  return true;
}

bool lower_hex(std::string_view v, std::size_t want) {
  if (v.size() != want) return false;
  for (char c : v)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Result<AgentSeed> parse_seed_env(std::string_view text) {
  if (text.size() > kSeedBlockBytes) return Error::invalid("seed", "longer than 4096 bytes");
  AgentSeed seed;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::size_t eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    std::string* field = nullptr;
    if (key == "KILN_API") field = &seed.api_url;
    else if (key == "KILN_NODE") field = &seed.node_id;
    else if (key == "KILN_OS_SECRET") field = &seed.os_secret;
    else if (key == "KILN_TLS_SHA256") field = &seed.tls_sha256;
    if (field == nullptr) continue;
    if (!plain_value(value)) return Error::invalid(std::string(key), "must be a plain value");
    *field = std::string(value);
  }
  if (!seed.os_secret.empty() && !lower_hex(seed.os_secret, 64))
    return Error::invalid("KILN_OS_SECRET", "must be 64 lowercase hex digits");
  if (!seed.tls_sha256.empty() && !lower_hex(seed.tls_sha256, 64))
    return Error::invalid("KILN_TLS_SHA256", "must be 64 lowercase hex digits");
  return seed;
}

std::string render_seed_env(const AgentSeed& seed) {
  std::string out;
  if (!seed.api_url.empty()) out += "KILN_API=" + seed.api_url + "\n";
  if (!seed.node_id.empty()) out += "KILN_NODE=" + seed.node_id + "\n";
  if (!seed.os_secret.empty()) out += "KILN_OS_SECRET=" + seed.os_secret + "\n";
  if (!seed.tls_sha256.empty()) out += "KILN_TLS_SHA256=" + seed.tls_sha256 + "\n";
  return out;
}

}  // namespace kiln::agent
