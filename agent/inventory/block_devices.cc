#include "agent/inventory/block_devices.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "agent/validate/checks/sysfs.h"

namespace kiln::agent {

namespace fs = std::filesystem;

namespace {

std::string read_or_empty(const fs::path& p) { return read_first_line(p).value_or(""); }

std::optional<std::uint64_t> read_u64(const fs::path& p) {
  auto s = read_first_line(p);
  if (!s || s->empty()) return std::nullopt;
  try {
    return std::stoull(*s);
  } catch (...) {
    return std::nullopt;
  }
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::string host_path(const std::string& root, const std::string& absolute) {
  if (root.empty() || root == "/") return absolute;
  return root + absolute;
}

bool is_managed_disk_name(const std::string& name) {
  static const char* const kSkip[] = {"loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd", "zd"};
  for (const char* p : kSkip)
    if (starts_with(name, p)) return false;
  return !name.empty();
}

std::optional<std::string> pci_address_of(const std::string& device_link) {
  std::error_code ec;
  const fs::path real = fs::canonical(device_link, ec);
  if (ec) return std::nullopt;
  static const std::regex kPci("^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]$");
  std::optional<std::string> found;
  // The last PCI-looking component is the function itself (its parents are bridges).
  for (const auto& part : real)
    if (std::regex_match(part.string(), kPci)) found = part.string();
  return found;
}

std::vector<BlockDisk> list_disks(const std::string& root) {
  std::vector<BlockDisk> out;
  std::error_code ec;
  const fs::path dir = host_path(root, "/sys/block");
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_managed_disk_name(name)) continue;
    const fs::path p = it->path();
    BlockDisk d;
    d.name = name;
    d.path = host_path(root, "/dev/" + name);
    d.size_bytes = read_u64(p / "size").value_or(0) * 512;
    d.nvme = starts_with(name, "nvme");
    d.model = read_or_empty(p / "device/model");
    d.vendor = read_or_empty(p / "device/vendor");
    d.serial = read_or_empty(p / "device/serial");
    if (d.serial.empty()) d.serial = read_or_empty(p / "serial");  // virtio-blk
    if (d.serial.empty()) {
      // SCSI/SATA: the unit serial number VPD page (4-byte header, then ASCII).
      if (auto vpd = read_text_file(p / "device/vpd_pg80"); vpd && vpd->size() > 4) {
        std::string sn = vpd->substr(4);
        sn.erase(std::remove(sn.begin(), sn.end(), '\0'), sn.end());
        sn.erase(0, sn.find_first_not_of(' '));
        sn.erase(sn.find_last_not_of(" \n") + 1);
        d.serial = sn;
      }
    }
    d.wwn = read_or_empty(p / "wwid");
    if (d.wwn.empty()) d.wwn = read_or_empty(p / "device/wwid");
    d.rotational = read_or_empty(p / "queue/rotational") == "1";
    d.removable = read_or_empty(p / "removable") == "1";
    d.read_only = read_or_empty(p / "ro") == "1";
    d.discard = read_u64(p / "queue/discard_max_bytes").value_or(0) > 0;
    d.logical_block_size = static_cast<unsigned>(read_u64(p / "queue/logical_block_size").value_or(512));
    d.physical_block_size = static_cast<unsigned>(read_u64(p / "queue/physical_block_size").value_or(512));
    d.pci_address = pci_address_of((p / "device").string());
    out.push_back(std::move(d));
  }
  std::sort(out.begin(), out.end(), [](const BlockDisk& a, const BlockDisk& b) { return a.name < b.name; });
  return out;
}

nlohmann::json to_json(const BlockDisk& d) {
  nlohmann::json j = {{"name", d.name},
                      {"path", "/dev/" + d.name},
                      {"size_bytes", d.size_bytes},
                      {"model", d.model},
                      {"vendor", d.vendor},
                      {"serial", d.serial},
                      {"wwn", d.wwn},
                      {"rotational", d.rotational},
                      {"removable", d.removable},
                      {"read_only", d.read_only},
                      {"nvme", d.nvme},
                      {"discard", d.discard},
                      {"logical_block_size", d.logical_block_size},
                      {"physical_block_size", d.physical_block_size}};
  j["pci_address"] = d.pci_address ? nlohmann::json(*d.pci_address) : nlohmann::json(nullptr);
  return j;
}

std::optional<BlockDisk> choose_target_disk(const std::vector<BlockDisk>& disks, std::uint64_t min_bytes) {
  std::optional<BlockDisk> best;
  for (const auto& d : disks) {
    if (d.removable || d.read_only || d.size_bytes == 0 || d.size_bytes < min_bytes) continue;
    if (!best || d.size_bytes < best->size_bytes) best = d;
  }
  return best;
}

}  // namespace kiln::agent
