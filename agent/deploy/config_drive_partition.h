#pragma once
// The `write_config_drive` command's disk work: after write_image, put the
// config drive kilnd built (an ISO 9660 image labelled "cidata",
// controller/tenancy/config_drive.h) in a new partition at the very end of
// the disk, where cloud-init's NoCloud (and the demo OS) find it by label.
//
// The image written before is usually smaller than the disk, so its
// partition table describes the image, not the disk:
//
//   GPT (UEFI 2.10, 5.3): the backup header and its entry array are moved
//     to the real end of the disk (backup header in the last LBA, the array
//     just before it), LastUsableLBA grows up to the array, one unused entry
//     becomes the partition (type "Linux filesystem data"
//     0FC63DAF-8483-4772-8E79-3D69D8477DE4, name "cidata", a random unique
//     GUID), both headers get their CRC32s again, and the protective MBR's
//     0xEE entry is stretched to the disk (5.2.3). The old backup header is
//     zeroed so no tool finds a stale one.
//   MBR: a primary entry (type 0x83) in a free slot after the last used
//     one, LBA-only (CHS fields FE FF FF), within the first 2^32 sectors.
//
// The partition is the ISO rounded up to 1 MiB, ends at the end of the disk
// (GPT: at LastUsableLBA) and starts 1 MiB-aligned. The os agent's seed
// block (agent_seed.h), which write_image left in the disk's last 4 KiB and
// the backup GPT or the partition now covers, moves into the first 4 KiB of
// the partition: the ISO's System Area, which ISO 9660 readers skip.
// A disk whose last partition already holds a "cidata" ISO (the command run
// again) gets the new ISO in that partition when it fits.
//
// Refused cleanly, with the disk untouched: no partition table (kInvalidArgument),
// a GPT whose headers or entries fail their CRC, no free entry or slot, no
// room between the last partition and the end of the disk
// (kUnprocessable); kInternal for I/O errors. Blocking; the caller's thread.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/result.h"

namespace kiln::agent {

struct ConfigDriveReport {
  std::string device;
  std::string table;            // "gpt" | "dos"
  int partition = 0;            // its number (1-based, as Linux names it)
  std::uint64_t offset = 0;     // bytes from the start of the disk
  std::uint64_t size = 0;       // bytes
  bool reused = false;          // an existing cidata partition took the ISO
  bool seed_moved = false;      // the seed block now starts the partition
};

nlohmann::json to_json(const ConfigDriveReport& r);

// Writes `iso` as described above on `device` (a disk, or a file in tests).
Result<ConfigDriveReport> write_config_drive(const std::string& device, const std::string& iso, const Logger& log);

}  // namespace kiln::agent
