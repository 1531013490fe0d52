#include "agent/deploy/agent_seed.h"

#include "agent/deploy/block_device.h"
#include "agent/inventory/block_devices.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace kiln::agent {
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

namespace {

std::optional<AgentSeed> seed_in(BlockDevice& dev, std::uint64_t offset) {
  if (offset + kSeedBlockBytes > dev.size()) return std::nullopt;
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

// Byte offsets of the partitions of disk `name` (sysfs gives 512-byte units).
std::vector<std::uint64_t> partition_offsets(const std::string& root, const std::string& name) {
  std::vector<std::uint64_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(host_path(root, "/sys/block/" + name), ec)) {
    std::ifstream in(e.path() / "start");
    std::uint64_t start = 0;
    if (e.path().filename().string().rfind(name, 0) == 0 && in >> start) out.push_back(start * 512);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<AgentSeed> read_seed_block(const std::string& device) {
  auto opened = BlockDevice::open(device, false);
  if (!opened || opened->size() < kSeedBlockBytes) return std::nullopt;
  return seed_in(*opened, (opened->size() - kSeedBlockBytes) / kSeedBlockBytes * kSeedBlockBytes);
}

std::optional<AgentSeed> read_seed_block_at(const std::string& device, std::uint64_t offset) {
  auto opened = BlockDevice::open(device, false);
  if (!opened) return std::nullopt;
  return seed_in(*opened, offset);
}

std::optional<AgentSeed> find_seed_on_disks(const std::string& root) {
  for (const BlockDisk& d : list_disks(root)) {
    if (std::optional<AgentSeed> s = read_seed_block(d.path)) return s;
    for (std::uint64_t offset : partition_offsets(root, d.name))
      if (std::optional<AgentSeed> s = read_seed_block_at(d.path, offset)) return s;
  }
  return std::nullopt;
}

Result<std::optional<AgentSeed>> fetch_nocloud_seed(const std::string& root, const HttpClientOptions& http) {
  std::ifstream in(host_path(root, "/sys/class/dmi/id/product_serial"));
  std::string serial;
  if (!in || !std::getline(in, serial)) return std::optional<AgentSeed>();
  // "ds=nocloud-net;s=<url>" (or "ds=nocloud;..."), with the keys in any order.
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
