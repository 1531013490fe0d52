#pragma once
// The node's disks as the kernel lists them under <root>/sys/block. Pseudo and
// stacked devices (loop, ram, zram, device-mapper, md, optical, floppy, nbd)
// are left out: the agent inventories, wipes and writes physical disks only.
// All reads are blocking sysfs file reads.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::agent {

// `root` is a filesystem prefix: "" (or "/") reads the running host, a test
// passes the directory it wrote a sample tree into.
std::string host_path(const std::string& root, const std::string& absolute);

struct BlockDisk {
  std::string name;              // "nvme0n1"
  // The device node to open: "/dev/nvme0n1", under the same root prefix as
  // /sys (so a test's sample tree can hold regular files standing in for
  // disks, and a test can never touch the host's disks by accident). The
  // inventory JSON always says "/dev/<name>".
  std::string path;
  std::uint64_t size_bytes = 0;  // <name>/size is in 512-byte sectors whatever the block size
  std::string model, serial, wwn, vendor;
  bool rotational = false;
  bool removable = false;
  bool read_only = false;
  bool nvme = false;
  bool discard = false;          // queue/discard_max_bytes > 0
  unsigned logical_block_size = 512;
  unsigned physical_block_size = 512;
  std::optional<std::string> pci_address;
};

// Whether a /sys/block entry name is a disk the agent manages.
bool is_managed_disk_name(const std::string& name);

// Every managed disk, sorted by name.
std::vector<BlockDisk> list_disks(const std::string& root);

nlohmann::json to_json(const BlockDisk& d);

// The contract's default target for write_image: the smallest non-removable,
// writable disk at least `min_bytes` large; nullopt when none is.
std::optional<BlockDisk> choose_target_disk(const std::vector<BlockDisk>& disks, std::uint64_t min_bytes);

// Shared by the collectors: the PCI address ("0000:3b:00.0") a sysfs device
// link leads to (walking up through virtio and similar child devices), or
// nullopt for a device not on PCI.
std::optional<std::string> pci_address_of(const std::string& device_link);

}  // namespace kiln::agent
