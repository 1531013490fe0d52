#include "controller/tenancy/iso9660.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <string_view>

namespace kiln {
namespace {

constexpr uint32_t kSystemAreaBlocks = 16;  // ECMA-119 6.2.1
constexpr uint32_t kPvdLba = 16;
constexpr uint32_t kTerminatorLba = 17;
constexpr uint32_t kLPathLba = 18;
constexpr uint32_t kMPathLba = 19;
constexpr uint32_t kRootLba = 20;
constexpr std::size_t kMaxFiles = 1000;
constexpr std::size_t kMaxName = 100;  // NM + PX + the ISO identifier stay under a record's 255 bytes

// Directory record (ECMA-119 9.1) without its identifier and System Use.
constexpr std::size_t kRecordBase = 33;
constexpr uint8_t kFlagDirectory = 0x02;  // 9.1.6 bit 1

// RRIP 4.1.1 PX (RRIP 1.10: no file serial number, 36 bytes).
constexpr std::size_t kPxLen = 36;
constexpr uint32_t kDirMode = 0040555;
constexpr uint32_t kFileMode = 0100444;
// SUSP 5.3 SP and 5.1 CE.
constexpr std::size_t kSpLen = 7;
constexpr std::size_t kCeLen = 28;
// SUSP 5.5 ER, with the identifier, descriptor and source RRIP 1.10
// specifies for its ER entry.
constexpr std::string_view kRripId = "RRIP_1991A";
constexpr std::string_view kRripDescriptor =
    "THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS";
constexpr std::string_view kRripSource =
    "PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME "
    "DESCRIPTOR FOR CONTACT INFORMATION.";

// Both-byte-order fields (ECMA-119 7.2.3, 7.3.3) and single-order ones.
void le16(std::string& b, std::size_t at, uint16_t v) {
  b[at] = static_cast<char>(v & 0xff);
  b[at + 1] = static_cast<char>(v >> 8);
}
void be16(std::string& b, std::size_t at, uint16_t v) {
  b[at] = static_cast<char>(v >> 8);
  b[at + 1] = static_cast<char>(v & 0xff);
}
void le32(std::string& b, std::size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void be32(std::string& b, std::size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * (3 - i))) & 0xff);
}
void both16(std::string& b, std::size_t at, uint16_t v) {
  le16(b, at, v);
  be16(b, at + 2, v);
}
void both32(std::string& b, std::size_t at, uint32_t v) {
  le32(b, at, v);
  be32(b, at + 4, v);
}
// A fixed-width text field padded with spaces (a- and d-character fields, 7.4).
void text(std::string& b, std::size_t at, std::size_t width, std::string_view s) {
  for (std::size_t i = 0; i < width; ++i) b[at + i] = i < s.size() ? s[i] : ' ';
}

std::tm utc(int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return tm;
}

// 9.1.5: seven bytes, years since 1900 .. seconds, then the offset from GMT.
std::string record_date(int64_t t) {
  std::tm tm = utc(t);
  std::string d(7, '\0');
  d[0] = static_cast<char>(tm.tm_year);
  d[1] = static_cast<char>(tm.tm_mon + 1);
  d[2] = static_cast<char>(tm.tm_mday);
  d[3] = static_cast<char>(tm.tm_hour);
  d[4] = static_cast<char>(tm.tm_min);
  d[5] = static_cast<char>(tm.tm_sec);
  return d;
}

// 8.4.26.1: "YYYYMMDDHHMMSScc" digits then the offset byte; all "0" = not specified.
std::string volume_date(std::optional<int64_t> t) {
  std::string d(17, '\0');
  if (!t) {
    std::fill(d.begin(), d.begin() + 16, '0');
    return d;
  }
  std::tm tm = utc(*t);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d%02d%02d%02d%02d%02d00", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec);
  std::copy(buf, buf + 16, d.begin());
  return d;
}

// A SUSP entry (SUSP 4.1) of `len` bytes: signature, length, version 1, then zeros.
std::string susp_entry(const char (&sig)[3], std::size_t len) {
  std::string e(len, '\0');
  e[0] = sig[0];
  e[1] = sig[1];
  e[2] = static_cast<char>(len);
  e[3] = 1;
  return e;
}

std::string px(uint32_t mode, uint32_t links) {
  std::string e = susp_entry("PX", kPxLen);
  both32(e, 4, mode);
  both32(e, 12, links);
  both32(e, 20, 0);  // uid
  both32(e, 28, 0);  // gid
  return e;
}

std::string sp() { return std::string("SP\x07\x01\xbe\xef\x00", kSpLen); }

std::string ce(uint32_t lba, uint32_t length) {
  std::string e = susp_entry("CE", kCeLen);
  both32(e, 4, lba);
  both32(e, 12, 0);  // offset in the block
  both32(e, 20, length);
  return e;
}

std::string er() {
  std::string e = "ER";
  e += static_cast<char>(8 + kRripId.size() + kRripDescriptor.size() + kRripSource.size());
  e += '\x01';
  e += static_cast<char>(kRripId.size());
  e += static_cast<char>(kRripDescriptor.size());
  e += static_cast<char>(kRripSource.size());
  e += '\x01';  // extension version
  e += kRripId;
  e += kRripDescriptor;
  e += kRripSource;
  return e;
}

std::string nm(const std::string& name) {
  std::string e = "NM";
  e += static_cast<char>(5 + name.size());
  e += '\x01';
  e += '\x00';  // flags: a whole name, not "." or ".."
  e += name;
  return e;
}

// One directory record (9.1): `id` is the File Identifier bytes.
std::string record(std::string_view id, uint32_t lba, uint32_t size, bool dir, int64_t time,
                   const std::string& system_use) {
  std::size_t len = kRecordBase + id.size() + (id.size() % 2 == 0 ? 1 : 0);  // 9.1.12 padding
  std::size_t total = len + system_use.size();
  total += total % 2;  // even, so the next record starts on an even byte
  std::string r(total, '\0');
  r[0] = static_cast<char>(total);
  both32(r, 2, lba);
  both32(r, 10, size);
  std::string date = record_date(time);
  std::copy(date.begin(), date.end(), r.begin() + 18);
  r[25] = static_cast<char>(dir ? kFlagDirectory : 0);
  both16(r, 28, 1);  // volume sequence number
  r[32] = static_cast<char>(id.size());
  std::copy(id.begin(), id.end(), r.begin() + 33);
  std::copy(system_use.begin(), system_use.end(), r.begin() + static_cast<std::ptrdiff_t>(len));
  return r;
}

bool good_name(const std::string& n) {
  if (n.empty() || n.size() > kMaxName || n == "." || n == "..") return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

// d-characters (7.4.1): A-Z 0-9 _.
std::string d_chars(std::string_view s, std::size_t width) {
  std::string out;
  for (char c : s) {
    if (out.size() == width) break;
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    out += ok ? c : '_';
  }
  return out;
}

struct IsoName {
  std::string base;  // up to 8 d-characters
  std::string ext;   // up to 3
  std::string id() const { return base + "." + ext + ";1"; }
  // 9.3: ordered by name then extension, each padded with spaces.
  std::string sort_key() const { return base + std::string(8 - base.size(), ' ') + ext + std::string(3 - ext.size(), ' '); }
};

IsoName iso_name(const std::string& name) {
  std::size_t dot = name.rfind('.');
  IsoName n;
  if (dot == std::string::npos || dot == 0) {
    n.base = d_chars(name, 8);
  } else {
    n.base = d_chars(std::string_view(name).substr(0, dot), 8);
    n.ext = d_chars(std::string_view(name).substr(dot + 1), 3);
  }
  if (n.base.empty()) n.base = "_";
  return n;
}

struct Entry {
  const IsoFile* file;
  IsoName iso;
  uint32_t lba = 0;
  std::string rec;
};

}  // namespace

std::string iso_identifier_base(const std::string& name) {
  IsoName n = iso_name(name);
  return n.ext.empty() ? n.base : n.base + "." + n.ext;
}

Result<std::string> build_iso9660(const IsoVolume& volume) {
  if (volume.label.empty() || volume.label.size() > 32 ||
      !std::all_of(volume.label.begin(), volume.label.end(), [](char c) { return c > ' ' && c < 0x7f; }))
    return Error::invalid("label", "must be 1 to 32 printable ASCII characters without spaces");
  if (volume.files.size() > kMaxFiles) return Error::invalid("files", "more than 1000 files");

  // ISO identifiers, unique (a clash gets a numeric tail: USER_DA1).
  std::vector<Entry> entries;
  std::set<std::string> names;
  std::set<std::string> ids;
  for (std::size_t i = 0; i < volume.files.size(); ++i) {
    const IsoFile& f = volume.files[i];
    const std::string field = "files/" + std::to_string(i) + "/name";
    if (!good_name(f.name)) return Error::invalid(field, "must be 1 to 100 characters of A-Z a-z 0-9 . _ -");
    if (!names.insert(f.name).second) return Error::invalid(field, "'" + f.name + "' is given twice");
    if (f.content.size() > UINT32_MAX) return Error::invalid("files/" + std::to_string(i), "larger than 4 GiB");
    Entry e{&f, iso_name(f.name)};
    std::string base = e.iso.base;
    for (int k = 1; !ids.insert(e.iso.id()).second; ++k) {
      std::string tail = std::to_string(k);
      e.iso.base = base.substr(0, 8 - tail.size()) + tail;
    }
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.iso.sort_key() < b.iso.sort_key(); });

  // The root directory's records, laid out first with placeholder locations
  // (a record's length does not depend on them) to count its blocks.
  const std::string er_entry = er();
  auto dot = [&](uint32_t root_blocks, uint32_t ce_lba) {
    return record(std::string_view("\0", 1), kRootLba, root_blocks * kIsoBlock, true, volume.time,
                  sp() + px(kDirMode, 2) + ce(ce_lba, static_cast<uint32_t>(er_entry.size())));
  };
  auto dotdot = [&](uint32_t root_blocks) {
    return record(std::string_view("\1", 1), kRootLba, root_blocks * kIsoBlock, true, volume.time,
                  px(kDirMode, 2));
  };
  auto file_record = [&](const Entry& e) {
    return record(e.iso.id(), e.lba, static_cast<uint32_t>(e.file->content.size()), false, volume.time,
                  nm(e.file->name) + px(kFileMode, 1));
  };
  std::vector<std::size_t> lengths = {dot(1, 0).size(), dotdot(1).size()};
  for (const Entry& e : entries) lengths.push_back(file_record(e).size());
  uint32_t root_blocks = 1;
  std::size_t used = 0;
  for (std::size_t len : lengths) {
    if (used + len > kIsoBlock) {  // 6.8.1.1: no record spans two blocks
      ++root_blocks;
      used = 0;
    }
    used += len;
  }
  const uint32_t ce_lba = kRootLba + root_blocks;
  uint32_t next = ce_lba + 1;
  for (Entry& e : entries) {
    e.lba = next;
    next += static_cast<uint32_t>((e.file->content.size() + kIsoBlock - 1) / kIsoBlock);
  }
  const uint32_t total_blocks = next;

  std::string img(static_cast<std::size_t>(total_blocks) * kIsoBlock, '\0');

  // Primary Volume Descriptor (8.4).
  const std::size_t pvd = kPvdLba * kIsoBlock;
  img[pvd] = 1;
  text(img, pvd + 1, 5, "CD001");
  img[pvd + 6] = 1;
  text(img, pvd + 8, 32, "");                 // system identifier
  text(img, pvd + 40, 32, volume.label);      // volume identifier
  both32(img, pvd + 80, total_blocks);        // volume space size
  both16(img, pvd + 120, 1);                  // volume set size
  both16(img, pvd + 124, 1);                  // volume sequence number
  both16(img, pvd + 128, kIsoBlock);          // logical block size
  both32(img, pvd + 132, 10);                 // path table size
  le32(img, pvd + 140, kLPathLba);
  be32(img, pvd + 148, kMPathLba);
  std::string root_in_pvd = record(std::string_view("\0", 1), kRootLba, root_blocks * kIsoBlock, true,
                                   volume.time, "");
  std::copy(root_in_pvd.begin(), root_in_pvd.end(), img.begin() + static_cast<std::ptrdiff_t>(pvd + 156));
  text(img, pvd + 190, 128, "");              // volume set
  text(img, pvd + 318, 128, "");              // publisher
  text(img, pvd + 446, 128, "");              // data preparer
  text(img, pvd + 574, 128, "KILN");          // application
  text(img, pvd + 702, 37 * 3, "");           // copyright, abstract, bibliographic file ids
  std::string made = volume_date(volume.time);
  std::string never = volume_date(std::nullopt);
  std::copy(made.begin(), made.end(), img.begin() + static_cast<std::ptrdiff_t>(pvd + 813));   // creation
  std::copy(made.begin(), made.end(), img.begin() + static_cast<std::ptrdiff_t>(pvd + 830));   // modification
  std::copy(never.begin(), never.end(), img.begin() + static_cast<std::ptrdiff_t>(pvd + 847)); // expiration
  std::copy(never.begin(), never.end(), img.begin() + static_cast<std::ptrdiff_t>(pvd + 864)); // effective
  img[pvd + 881] = 1;                         // file structure version

  // Volume Descriptor Set Terminator (8.3).
  const std::size_t term = kTerminatorLba * kIsoBlock;
  img[term] = static_cast<char>(255);
  text(img, term + 1, 5, "CD001");
  img[term + 6] = 1;

  // Path tables (9.4): one entry, the root, its own parent.
  const std::size_t lpt = kLPathLba * kIsoBlock;
  const std::size_t mpt = kMPathLba * kIsoBlock;
  img[lpt] = img[mpt] = 1;
  le32(img, lpt + 2, kRootLba);
  be32(img, mpt + 2, kRootLba);
  le16(img, lpt + 6, 1);
  be16(img, mpt + 6, 1);

  // The root directory.
  std::vector<std::string> records = {dot(root_blocks, ce_lba), dotdot(root_blocks)};
  for (const Entry& e : entries) records.push_back(file_record(e));
  std::size_t at = kRootLba * kIsoBlock;
  std::size_t block_end = at + kIsoBlock;
  for (const std::string& r : records) {
    if (at + r.size() > block_end) {
      at = block_end;
      block_end += kIsoBlock;
    }
    std::copy(r.begin(), r.end(), img.begin() + static_cast<std::ptrdiff_t>(at));
    at += r.size();
  }

  // The Continuation Area with the ER entry, then the files.
  std::copy(er_entry.begin(), er_entry.end(), img.begin() + static_cast<std::ptrdiff_t>(ce_lba * kIsoBlock));
  for (const Entry& e : entries)
    std::copy(e.file->content.begin(), e.file->content.end(),
              img.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(e.lba) * kIsoBlock));
  static_assert(kSystemAreaBlocks == kPvdLba, "the volume descriptors follow the System Area");
  return img;
}

}  // namespace kiln
