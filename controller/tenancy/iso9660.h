#pragma once
// A small ISO 9660 writer: one root directory of regular files, with Rock
// Ridge names so that Linux's isofs (and cloud-init, isoinfo -R, xorriso)
// see "user-data" rather than the 8.3 name ISO 9660 itself allows.
//
// What is written (ECMA-119 section numbers; SUSP = IEEE P1281 System Use
// Sharing Protocol 1.12; RRIP = IEEE P1282 Rock Ridge Interchange Protocol
// 1.10), 2048-byte logical blocks:
//
//   LBA 0-15   System Area (6.2.1), zeros: not read by ISO 9660 readers;
//              the agent keeps its seed block in the first 4 KiB of it
//   LBA 16     Primary Volume Descriptor (8.4), volume identifier = label
//   LBA 17     Volume Descriptor Set Terminator (8.3)
//   LBA 18/19  the L- and M-type Path Tables (9.4): the root alone
//   LBA 20..   the root directory's records (9.1): ".", "..", then each
//              file sorted by its ISO identifier (9.3); a record never
//              crosses a block (6.8.1.1)
//   then       one block of SUSP Continuation Area holding the ER entry
//   then       each file's extent, block-aligned
//
// Rock Ridge: the root's "." record carries SP (SUSP 5.3, "SUSP is used"),
// PX (RRIP 4.1.1, POSIX mode) and CE (SUSP 5.1) pointing at the ER entry
// (SUSP 5.5, extension "RRIP_1991A", whose presence is what makes Linux
// read Rock Ridge); every other record carries PX, and each file record NM
// (RRIP 4.1.4) with its real name. ISO identifiers are level-1 8.3
// d-character names derived from the real ones (USER_DAT.;1), unique.
// Joliet is not written: Linux, cloud-init and the tools above read Rock
// Ridge; Windows' cloudbase-init would need Joliet.
//
// Deterministic: the same input gives the same bytes (every date is
// `time`). Pure functions, any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace kiln {

inline constexpr std::size_t kIsoBlock = 2048;

struct IsoFile {
  std::string name;     // the Rock Ridge name: 1-100 bytes of [A-Za-z0-9._-], not "." or ".."
  std::string content;  // any bytes
};

struct IsoVolume {
  std::string label;           // the volume identifier (blkid's LABEL): 1-32 bytes, printable ASCII
  std::vector<IsoFile> files;  // the root directory, at most 1000 files
  int64_t time = 0;            // unix seconds for every recorded date (UTC)
};

// The image's bytes (a multiple of kIsoBlock). kInvalidArgument naming
// "label" or "files/<i>/name" for a bad label or name, or a name twice.
Result<std::string> build_iso9660(const IsoVolume& volume);

// The ISO 9660 identifier build_iso9660 gives `name` before it is made
// unique ("user-data" -> "USER_DAT"; no version suffix). For tests.
std::string iso_identifier_base(const std::string& name);

}  // namespace kiln
