#include "agent/deploy/config_drive_partition.h"

#include <zlib.h>

#include <openssl/rand.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "agent/deploy/agent_seed.h"
#include "agent/deploy/block_device.h"

namespace kiln::agent {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::string_view kLabel = "cidata";
constexpr std::size_t kIsoBlock = 2048;
constexpr std::size_t kPvdOffset = 16 * kIsoBlock;  // ECMA-119 6.2.1: after the System Area

// GPT (UEFI 2.10, 5.3.2 header, 5.3.3 entry): byte offsets.
constexpr std::size_t kHdrSize = 12, kHdrCrc = 16, kMyLba = 24, kAltLba = 32, kFirstUsable = 40,
                      kLastUsable = 48, kEntriesLba = 72, kEntryCount = 80, kEntrySize = 84, kEntriesCrc = 88;
constexpr std::size_t kMinHeader = 92;
constexpr std::uint32_t kMaxEntryBytes = 1024 * 1024;  // far above the usual 128 x 128
// "Linux filesystem data" 0FC63DAF-8483-4772-8E79-3D69D8477DE4, first three fields little-endian.
constexpr unsigned char kLinuxDataGuid[16] = {0xAF, 0x3D, 0xC6, 0x0F, 0x83, 0x84, 0x72, 0x47,
                                              0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47, 0x7D, 0xE4};
// MBR: four 16-byte entries at 446, 0x55AA at 510.
constexpr std::size_t kMbrEntries = 446;
constexpr std::uint8_t kProtective = 0xEE;
constexpr std::uint8_t kLinuxType = 0x83;

std::uint64_t get(const std::string& b, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}
void put(std::string& b, std::size_t at, int bytes, std::uint64_t v) {
  for (int i = 0; i < bytes; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
std::uint32_t crc(std::string_view s) {
  return static_cast<std::uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

Result<std::string> read(BlockDevice& d, std::uint64_t offset, std::size_t n) {
  std::string b(n, '\0');
  if (offset + n > d.size()) return Error(Code::kInternal, d.path() + ": read past the end");
  if (Status s = d.read_at(offset, b.data(), n); !s) return s.take_error();
  return b;
}

// Whether a partition at `offset` holds an ISO 9660 volume labelled cidata.
bool holds_cidata(BlockDevice& d, std::uint64_t offset) {
  Result<std::string> pvd = read(d, offset + kPvdOffset, kIsoBlock);
  if (!pvd || (*pvd)[0] != 1 || pvd->compare(1, 5, "CD001") != 0) return false;
  std::string id = pvd->substr(40, 32);
  id.erase(id.find_last_not_of(' ') + 1);
  return id == kLabel;
}

// The seed block's text at `offset`, if one is there.
std::optional<std::string> seed_at(BlockDevice& d, std::uint64_t offset) {
  Result<std::string> b = read(d, offset, kSeedBlockBytes);
  if (!b || b->compare(0, kSeedMagic.size(), kSeedMagic) != 0) return std::nullopt;
  return *b;
}

struct Placement {
  std::uint64_t first = 0;  // LBA
  std::uint64_t last = 0;   // LBA, inclusive
};

// The ISO's room, ending at `last` and starting 1 MiB-aligned, at or after `free_from`.
std::optional<Placement> place(std::uint64_t free_from, std::uint64_t last, std::uint64_t iso_bytes, unsigned lba) {
  const std::uint64_t want = (iso_bytes + kMiB - 1) / kMiB * kMiB / lba;
  const std::uint64_t align = std::max<std::uint64_t>(1, kMiB / lba);
  if (last + 1 < want) return std::nullopt;
  const std::uint64_t first = (last + 1 - want) / align * align;
  if (first < free_from || first == 0) return std::nullopt;
  return Placement{first, last};
}

Error no_room(const std::string& where, std::uint64_t iso_bytes) {
  return Error(Code::kUnprocessable, "no room for the config drive (" + std::to_string(iso_bytes) +
                                         " bytes, 1 MiB-aligned) between the last partition and " + where);
}

// The partition's bytes: the ISO, the seed over its System Area, zeros after.
std::string partition_content(const std::string& iso, std::uint64_t bytes, const std::optional<std::string>& seed) {
  std::string c(bytes, '\0');
  std::copy(iso.begin(), iso.end(), c.begin());
  if (seed) std::copy(seed->begin(), seed->end(), c.begin());
  return c;
}

class Writer {
 public:
  Writer(BlockDevice& dev, const std::string& iso, ConfigDriveReport& report)
      : d_(dev), iso_(iso), r_(report), lba_(dev.logical_block_size()) {}

  Status run() {
    Result<std::string> mbr = read(d_, 0, lba_);
    if (!mbr) return mbr.take_error();
    mbr_ = std::move(*mbr);
    if (static_cast<unsigned char>(mbr_[510]) != 0x55 || static_cast<unsigned char>(mbr_[511]) != 0xAA)
      return Error::invalid("device", d_.path() + " has no partition table (the image must bring one)");
    // The seed write_image left at the end, read before anything moves.
    seed_ = seed_at(d_, (d_.size() - kSeedBlockBytes) / kSeedBlockBytes * kSeedBlockBytes);
    for (int i = 0; i < 4; ++i)
      if (static_cast<std::uint8_t>(mbr_[kMbrEntries + 16 * i + 4]) == kProtective) return gpt();
    return dos();
  }

 private:
  // The command run again: the last partition already is the config drive.
  Result<bool> reuse(std::uint64_t first, std::uint64_t last) {
    if (!holds_cidata(d_, first * lba_) || (last - first + 1) * lba_ < iso_.size()) return false;
    if (!seed_) seed_ = seed_at(d_, first * lba_);
    if (Status s = fill(first, last); !s) return s.take_error();
    r_.reused = true;
    return true;
  }

  Status fill(std::uint64_t first, std::uint64_t last) {
    r_.offset = first * lba_;
    r_.size = (last - first + 1) * lba_;
    r_.seed_moved = seed_.has_value();
    std::string c = partition_content(iso_, r_.size, seed_);
    return d_.write_at(r_.offset, c.data(), c.size());
  }

  Status gpt() {
    r_.table = "gpt";
    Result<std::string> h = read(d_, lba_, lba_);
    if (!h) return h.take_error();
    std::string hdr = std::move(*h);
    const std::uint64_t hsize = get(hdr, kHdrSize, 4);
    if (hdr.compare(0, 8, "EFI PART") != 0 || hsize < kMinHeader || hsize > lba_)
      return Error(Code::kUnprocessable, d_.path() + ": the primary GPT header is missing or malformed");
    std::string zeroed = hdr.substr(0, hsize);
    put(zeroed, kHdrCrc, 4, 0);
    if (crc(zeroed) != get(hdr, kHdrCrc, 4))
      return Error(Code::kUnprocessable, d_.path() + ": the primary GPT header fails its CRC32");
    const std::uint64_t count = get(hdr, kEntryCount, 4), esize = get(hdr, kEntrySize, 4);
    if (esize < 128 || esize % 8 != 0 || count * esize > kMaxEntryBytes)
      return Error(Code::kUnprocessable, d_.path() + ": the GPT entry array is malformed");
    const std::uint64_t entries_lba = get(hdr, kEntriesLba, 8);
    Result<std::string> e = read(d_, entries_lba * lba_, count * esize);
    if (!e) return e.take_error();
    std::string entries = std::move(*e);
    if (crc(entries) != get(hdr, kEntriesCrc, 4))
      return Error(Code::kUnprocessable, d_.path() + ": the GPT partition entries fail their CRC32");

    std::uint64_t free_from = get(hdr, kFirstUsable, 8);
    std::optional<std::size_t> slot, last_part;
    for (std::size_t i = 0; i < count; ++i) {
      std::string_view type(entries.data() + i * esize, 16);
      if (std::all_of(type.begin(), type.end(), [](char c) { return c == 0; })) {
        if (!slot) slot = i;
        continue;
      }
      free_from = std::max(free_from, get(entries, i * esize + 40, 8) + 1);
      if (!last_part || get(entries, i * esize + 32, 8) > get(entries, *last_part * esize + 32, 8)) last_part = i;
    }
    if (last_part) {
      Result<bool> reused = reuse(get(entries, *last_part * esize + 32, 8), get(entries, *last_part * esize + 40, 8));
      if (!reused) return reused.take_error();
      if (*reused) {
        r_.partition = static_cast<int>(*last_part) + 1;
        return d_.sync();
      }
    }
    if (!slot) return Error(Code::kUnprocessable, d_.path() + ": no free GPT partition entry for the config drive");

    const std::uint64_t disk_lbas = d_.size() / lba_;
    const std::uint64_t array_lbas = (count * esize + lba_ - 1) / lba_;
    const std::uint64_t backup_lba = disk_lbas - 1;
    const std::uint64_t backup_entries = backup_lba - array_lbas;
    const std::uint64_t last_usable = backup_entries - 1;
    std::optional<Placement> p = place(free_from, last_usable, iso_.size(), lba_);
    if (!p) return no_room("the backup GPT at the end of the disk", iso_.size());

    // The entry (5.3.3): type, unique GUID (random, version 4), first and
    // last LBA, no attributes, the name in UTF-16LE.
    const std::size_t at = *slot * esize;
    std::copy(std::begin(kLinuxDataGuid), std::end(kLinuxDataGuid), entries.begin() + static_cast<std::ptrdiff_t>(at));
    unsigned char guid[16];
    if (RAND_bytes(guid, sizeof guid) != 1) return Error(Code::kInternal, "no random bytes for a partition GUID");
    guid[7] = static_cast<unsigned char>((guid[7] & 0x0f) | 0x40);
    guid[8] = static_cast<unsigned char>((guid[8] & 0x3f) | 0x80);
    std::copy(guid, guid + 16, entries.begin() + static_cast<std::ptrdiff_t>(at + 16));
    put(entries, at + 32, 8, p->first);
    put(entries, at + 40, 8, p->last);
    put(entries, at + 48, 8, 0);
    for (std::size_t k = 0; k < 36; ++k)
      put(entries, at + 56 + 2 * k, 2, k < kLabel.size() ? static_cast<unsigned char>(kLabel[k]) : 0);

    const std::uint64_t old_backup = get(hdr, kAltLba, 8);
    put(hdr, kAltLba, 8, backup_lba);
    put(hdr, kLastUsable, 8, last_usable);
    put(hdr, kEntriesCrc, 4, crc(entries));
    std::string backup = hdr;
    put(backup, kMyLba, 8, backup_lba);
    put(backup, kAltLba, 8, 1);
    put(backup, kEntriesLba, 8, backup_entries);
    seal(hdr, hsize);
    seal(backup, hsize);

    // Order: what nothing points at yet first, the primary header last.
    if (old_backup != backup_lba && old_backup > 1 && old_backup < p->first) {
      std::string zeros(lba_, '\0');
      if (Status s = d_.write_at(old_backup * lba_, zeros.data(), zeros.size()); !s) return s;
    }
    if (Status s = fill(p->first, p->last); !s) return s;
    if (Status s = d_.write_at(backup_entries * lba_, entries.data(), entries.size()); !s) return s;
    if (Status s = d_.write_at(backup_lba * lba_, backup.data(), backup.size()); !s) return s;
    if (Status s = d_.write_at(entries_lba * lba_, entries.data(), entries.size()); !s) return s;
    if (Status s = d_.write_at(lba_, hdr.data(), hdr.size()); !s) return s;
    // The protective MBR covers the whole disk (or 2^32-1 sectors) (5.2.3).
    for (int i = 0; i < 4; ++i) {
      const std::size_t pe = kMbrEntries + 16 * static_cast<std::size_t>(i);
      if (static_cast<std::uint8_t>(mbr_[pe + 4]) == kProtective)
        put(mbr_, pe + 12, 4, std::min<std::uint64_t>(disk_lbas - 1, 0xFFFFFFFFu));
    }
    if (Status s = d_.write_at(0, mbr_.data(), mbr_.size()); !s) return s;
    r_.partition = static_cast<int>(*slot) + 1;
    return d_.sync();
  }

  static void seal(std::string& hdr, std::uint64_t hsize) {
    put(hdr, kHdrCrc, 4, 0);
    put(hdr, kHdrCrc, 4, crc(std::string_view(hdr).substr(0, hsize)));
  }

  Status dos() {
    r_.table = "dos";
    std::uint64_t free_from = 1;
    int last_used = -1;
    std::optional<int> last_part;
    for (int i = 0; i < 4; ++i) {
      const std::size_t pe = kMbrEntries + 16 * static_cast<std::size_t>(i);
      if (mbr_[pe + 4] == 0) continue;
      last_used = i;
      const std::uint64_t start = get(mbr_, pe + 8, 4), n = get(mbr_, pe + 12, 4);
      free_from = std::max(free_from, start + n);
      if (!last_part || start > get(mbr_, kMbrEntries + 16 * static_cast<std::size_t>(*last_part) + 8, 4))
        last_part = i;
    }
    if (last_part) {
      const std::size_t pe = kMbrEntries + 16 * static_cast<std::size_t>(*last_part);
      const std::uint64_t start = get(mbr_, pe + 8, 4), n = get(mbr_, pe + 12, 4);
      Result<bool> reused = n == 0 ? Result<bool>(false) : reuse(start, start + n - 1);
      if (!reused) return reused.take_error();
      if (*reused) {
        r_.partition = *last_part + 1;
        return d_.sync();
      }
    }
    if (last_used == 3)
      return Error(Code::kUnprocessable, d_.path() + ": no free primary slot after the last partition in the MBR");
    const int slot = last_used + 1;
    const std::uint64_t end = std::min<std::uint64_t>(d_.size() / lba_, 0x100000000ull);  // MBR's 32-bit LBAs
    std::optional<Placement> p = place(free_from, end - 1, iso_.size(), lba_);
    if (!p) return no_room("the end of the disk", iso_.size());
    const std::size_t pe = kMbrEntries + 16 * static_cast<std::size_t>(slot);
    const char lba_only[3] = {'\xFE', '\xFF', '\xFF'};  // CHS "use the LBA fields"
    mbr_[pe] = 0;
    std::copy(lba_only, lba_only + 3, mbr_.begin() + static_cast<std::ptrdiff_t>(pe + 1));
    mbr_[pe + 4] = static_cast<char>(kLinuxType);
    std::copy(lba_only, lba_only + 3, mbr_.begin() + static_cast<std::ptrdiff_t>(pe + 5));
    put(mbr_, pe + 8, 4, p->first);
    put(mbr_, pe + 12, 4, p->last - p->first + 1);
    if (Status s = fill(p->first, p->last); !s) return s;
    if (Status s = d_.write_at(0, mbr_.data(), mbr_.size()); !s) return s;
    r_.partition = slot + 1;
    return d_.sync();
  }

  BlockDevice& d_;
  const std::string& iso_;
  ConfigDriveReport& r_;
  const unsigned lba_;
  std::string mbr_;
  std::optional<std::string> seed_;
};

}  // namespace

nlohmann::json to_json(const ConfigDriveReport& r) {
  return {{"device", r.device},         {"table", r.table},   {"partition", r.partition},
          {"offset", r.offset},         {"size", r.size},     {"reused", r.reused},
          {"seed_moved", r.seed_moved}};
}

Result<ConfigDriveReport> write_config_drive(const std::string& device, const std::string& iso, const Logger& log) {
  if (iso.size() < kPvdOffset + kIsoBlock || iso.compare(kPvdOffset + 1, 5, "CD001") != 0)
    return Error::invalid("iso", "is not an ISO 9660 image");
  auto opened = BlockDevice::open(device);
  if (!opened) return opened.take_error();
  if (opened->size() < 2 * kMiB) return Error::invalid("device", device + " is too small for a config drive");
  ConfigDriveReport report;
  report.device = device;
  Writer w(*opened, iso, report);
  if (Status s = w.run(); !s) return s.take_error();
  log.info("config drive written", {{"device", device},
                                    {"table", report.table},
                                    {"partition", std::to_string(report.partition)},
                                    {"offset", std::to_string(report.offset)},
                                    {"reused", report.reused ? "true" : "false"}});
  return report;
}

}  // namespace kiln::agent
