#include "agent/deploy/agent_seed.h"

#include "agent/deploy/block_device.h"
#include "agent/inventory/block_devices.h"

#include <fstream>
#include <sstream>

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

Status write_seed_block(const std::string& device, std::uint64_t image_bytes, const AgentSeed& seed) {
  const std::string text = std::string(kSeedMagic) + render_seed_env(seed);
  if (text.size() > kSeedBlockBytes) return Error::invalid("seed", "longer than 4096 bytes");
  auto opened = BlockDevice::open(device);
  if (!opened) return opened.take_error();
  BlockDevice& dev = *opened;
  if (dev.size() < kSeedBlockBytes) return Error::invalid("device", device + " is smaller than the seed block");
  const std::uint64_t offset = (dev.size() - kSeedBlockBytes) / kSeedBlockBytes * kSeedBlockBytes;
  if (offset < image_bytes)
    return Error::invalid("device", device + " has no room after the image for the os agent's seed (the image fills "
                                             "the disk)");
  AlignedBuffer block(kSeedBlockBytes);
  std::copy(text.begin(), text.end(), block.data());
  if (Status s = dev.write_at(offset, block.data(), kSeedBlockBytes); !s) return s;
  return dev.sync();
}

std::optional<AgentSeed> read_seed_block(const std::string& device) {
  auto opened = BlockDevice::open(device, false);
  if (!opened) return std::nullopt;
  BlockDevice& dev = *opened;
  if (dev.size() < kSeedBlockBytes) return std::nullopt;
  const std::uint64_t offset = (dev.size() - kSeedBlockBytes) / kSeedBlockBytes * kSeedBlockBytes;
  AlignedBuffer block(kSeedBlockBytes);
  if (!dev.read_at(offset, block.data(), kSeedBlockBytes)) return std::nullopt;
  std::string_view all(block.data(), kSeedBlockBytes);
  if (all.substr(0, kSeedMagic.size()) != kSeedMagic) return std::nullopt;
  std::string_view body = all.substr(kSeedMagic.size());
  if (std::size_t nul = body.find('\0'); nul != std::string_view::npos) body = body.substr(0, nul);
  Result<AgentSeed> seed = parse_seed_env(body);
  if (!seed) return std::nullopt;
  return *seed;
}

std::optional<AgentSeed> find_seed_on_disks(const std::string& root) {
  for (const BlockDisk& d : list_disks(root))
    if (std::optional<AgentSeed> s = read_seed_block(d.path)) return s;
  return std::nullopt;
}

Result<std::optional<AgentSeed>> fetch_nocloud_seed(const std::string& root, const HttpClientOptions& http) {
  std::ifstream in(host_path(root, "/sys/class/dmi/id/product_serial"));
  std::string serial;
  if (!in || !std::getline(in, serial)) return std::optional<AgentSeed>();
  // "ds=nocloud;s=<url>" with the keys in any order.
  if (serial.rfind("ds=nocloud", 0) != 0) return std::optional<AgentSeed>();
  std::string url;
  std::istringstream parts(serial);
  std::string part;
  while (std::getline(parts, part, ';'))
    if (part.rfind("s=", 0) == 0) url = part.substr(2);
  if (url.empty()) return std::optional<AgentSeed>();
  if (url.back() != '/') url += '/';
  Result<HttpResponse> r = HttpClient(http).request("GET", url + "kiln-agent.env");
  if (!r) return r.take_error();
  if (r->status != 200)
    return Error(Code::kUnavailable, "NoCloud seed " + url + "kiln-agent.env: HTTP " + std::to_string(r->status));
  Result<AgentSeed> seed = parse_seed_env(r->body);
  if (!seed) return seed.take_error();
  return std::optional<AgentSeed>(*seed);
}

}  // namespace kiln::agent
