#pragma once
// The `wipe` command: make every disk look blank to firmware, the kernel and
// installers, quickly, and prove it by reading the bytes back.
//
// Every partition table and filesystem or RAID signature we care about lives
// within the first or last MiB of a disk or of a partition: MBR (sector 0),
// GPT (LBA 1 + entries, and the backup at the last LBAs), LVM (sector 1), md
// 1.1/1.2 (0 and 4 KiB) and 1.0/0.90 (last 64-128 KiB), ext*, XFS, btrfs
// (64 KiB), ISO9660 (32 KiB), ZFS labels (first and last 512 KiB). So the wipe
// zeroes the first and last `edge_bytes` of the disk and of every partition the
// disk's own GPT or MBR lists (read before it is zeroed), so re-creating the
// same partition table later cannot resurrect an old filesystem. It discards
// the whole disk first when the device supports it (fast secure-ish erase on
// SSDs; EOPNOTSUPP is ignored) and optionally overwrites every byte.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/deploy/block_device.h"
#include "common/log.h"
#include "common/result.h"

namespace kiln::agent {

struct WipeOptions {
  bool full_overwrite = false;
  bool discard = true;
  std::uint64_t edge_bytes = 1024 * 1024;  // at least 1 MiB: covers every signature listed above
};

struct DiskWipeReport {
  std::string name;  // "sda" (the file name for a regular file)
  std::string path;
  std::uint64_t size_bytes = 0;
  bool discarded = false;
  bool overwritten = false;
  bool verified = false;
  std::size_t partitions = 0;  // partitions found in the old table and wiped too
  std::string error;           // empty when the wipe succeeded and verified
};

nlohmann::json to_json(const DiskWipeReport& r);

// Byte ranges [start, end) of the partitions the device's GPT (512 or 4096
// byte sectors) or MBR lists; empty when it has neither.
std::vector<std::pair<std::uint64_t, std::uint64_t>> partition_extents(BlockDevice& dev);

// Wipes one device (a block device or a regular file). Never throws; the
// report carries the outcome (`error` set and `verified` false on failure).
DiskWipeReport wipe_device(const std::string& path, const WipeOptions& options, const Logger& log);

// Wipes every managed, writable, non-removable disk listed under <root>/sys/block
// (device nodes at <root>/dev/<name>). Returns {"disks": [report...]}; the error,
// when any disk failed, names each failed disk and carries the same JSON.
struct WipeAllResult {
  nlohmann::json result;
  std::string error;  // "" when every disk verified
};
WipeAllResult wipe_all_disks(const std::string& root, const WipeOptions& options, const Logger& log);

// Zeroes the first and last `bytes` of an open device (used by write_image to
// make a half-written image unbootable). Syncs.
Status zero_edges(BlockDevice& dev, std::uint64_t bytes);

}  // namespace kiln::agent
