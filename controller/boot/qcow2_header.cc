// parse_qcow2_header: the qcow2 header read by kilnd itself, before any qemu
// tool opens the file (qcow2_image.h says why).
//
// Offsets and rules are those of qemu's docs/interop/qcow2.txt ("Header",
// "Header extensions"); all numbers are big-endian. Everything here is a
// pure function of the bytes given, so the fuzzer drives it directly
// (tests/fuzz/targets/qcow2_header.cc). A field is checked before it is used
// in arithmetic: every product below is of values already bounded far from
// overflow.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "controller/boot/qcow2_image.h"

namespace kiln::boot {

namespace {

constexpr uint32_t kMagic = 0x514649fb;  // "QFI\xfb"

// Header extension types (qcow2.txt, "Header extensions").
constexpr uint32_t kExtEnd = 0x00000000;
constexpr uint32_t kExtBackingFormat = 0xe2792aca;
constexpr uint32_t kExtEncryption = 0x0537be77;  // full disk encryption header pointer
constexpr uint32_t kExtDataFile = 0x44415441;    // external data file name

// Incompatible feature bits (header bytes 72-79).
constexpr uint64_t kIncompatDirty = 1u << 0;
constexpr uint64_t kIncompatCorrupt = 1u << 1;
constexpr uint64_t kIncompatDataFile = 1u << 2;
constexpr uint64_t kIncompatCompression = 1u << 3;
constexpr uint64_t kIncompatExtendedL2 = 1u << 4;
constexpr uint64_t kIncompatKnown =
    kIncompatDirty | kIncompatCorrupt | kIncompatDataFile | kIncompatCompression | kIncompatExtendedL2;
// Autoclear bit 1: "raw external data" (only meaningful with a data file).
constexpr uint64_t kAutoclearRawData = 1u << 1;

// qemu's own limits (block/qcow2.h), which no image it can open exceeds:
// 2 MiB clusters, a 32 MiB L1 table, an 8 MiB refcount table, 65536 snapshots.
constexpr uint32_t kMinClusterBits = 9;
constexpr uint32_t kMaxClusterBits = 21;
constexpr uint64_t kMaxL1Bytes = 32u << 20;
constexpr uint64_t kMaxRefcountTableBytes = 8u << 20;
constexpr uint32_t kMaxSnapshots = 65536;

uint32_t be32(std::span<const uint8_t> b, size_t at) {
  return uint32_t{b[at]} << 24 | uint32_t{b[at + 1]} << 16 | uint32_t{b[at + 2]} << 8 | uint32_t{b[at + 3]};
}
uint64_t be64(std::span<const uint8_t> b, size_t at) { return uint64_t{be32(b, at)} << 32 | be32(b, at + 4); }

std::string hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Error refuse(const std::string& why) { return Error(Code::kUnprocessable, "qcow2 image refused: " + why); }

}  // namespace

Result<Qcow2Info> parse_qcow2_header(std::span<const uint8_t> head, int64_t file_size) {
  if (file_size < 0) return Error(Code::kInvalidArgument, "negative file size");
  // Bytes past the end of the file are not the file's, whatever the caller passed.
  if (static_cast<uint64_t>(head.size()) > static_cast<uint64_t>(file_size)) head = head.first(file_size);
  const uint64_t fsize = static_cast<uint64_t>(file_size);

  if (head.size() < 4 || be32(head, 0) != kMagic) {
    return Error(Code::kUnprocessable, "not a qcow2 image (bad magic)");
  }
  if (head.size() < 8) return refuse("truncated header (" + std::to_string(head.size()) + " bytes)");
  const uint32_t version = be32(head, 4);
  if (version != 2 && version != 3) return refuse("unsupported qcow2 version " + std::to_string(version));
  const size_t fixed = version == 2 ? 72 : 104;
  if (head.size() < fixed) {
    return refuse("truncated header (" + std::to_string(head.size()) + " bytes, version " + std::to_string(version) +
                  " needs " + std::to_string(fixed) + ")");
  }

  const uint64_t backing_file_offset = be64(head, 8);
  const uint32_t cluster_bits = be32(head, 20);
  const uint64_t size = be64(head, 24);
  const uint32_t crypt_method = be32(head, 32);
  const uint32_t l1_size = be32(head, 36);
  const uint64_t l1_table_offset = be64(head, 40);
  const uint64_t refcount_table_offset = be64(head, 48);
  const uint32_t refcount_table_clusters = be32(head, 56);
  const uint32_t nb_snapshots = be32(head, 60);
  const uint64_t snapshots_offset = be64(head, 64);
  uint64_t incompatible = 0, autoclear = 0;
  uint32_t header_length = 72;
  if (version == 3) {
    incompatible = be64(head, 72);
    autoclear = be64(head, 88);
    const uint32_t refcount_order = be32(head, 96);
    header_length = be32(head, 100);
    if (refcount_order > 6) return refuse("refcount_order " + std::to_string(refcount_order) + " above 6");
    if (header_length < 104 || header_length % 8 != 0) {
      return refuse("header_length " + std::to_string(header_length) + " (at least 104, a multiple of 8)");
    }
  }

  // What reaches outside the file: a crafted image reads host files this way.
  if (backing_file_offset != 0) return refuse("it has a backing file");
  if (incompatible & kIncompatDataFile) return refuse("it has an external data file (incompatible feature bit 2)");
  if (autoclear & kAutoclearRawData) return refuse("it has an external data file (raw external data bit)");
  if (crypt_method != 0) return refuse("it is encrypted (crypt_method " + std::to_string(crypt_method) + ")");
  if (incompatible & ~kIncompatKnown) {
    return refuse("unknown incompatible feature bits " + hex(incompatible & ~kIncompatKnown));
  }
  if (incompatible & kIncompatCorrupt) return refuse("qemu marked it corrupt (incompatible feature bit 1)");

  if (cluster_bits < kMinClusterBits || cluster_bits > kMaxClusterBits) {
    return refuse("cluster_bits " + std::to_string(cluster_bits) + " outside 9..21");
  }
  if ((incompatible & kIncompatExtendedL2) && cluster_bits < 14) {
    return refuse("extended L2 entries need cluster_bits of at least 14");
  }
  const uint64_t cluster_size = uint64_t{1} << cluster_bits;
  if (header_length > cluster_size) return refuse("header_length larger than a cluster");

  if (size == 0) return refuse("virtual size 0");
  // qemu counts the disk in 512-byte sectors and drops a remainder: the
  // header and qemu-img would disagree on the size.
  if (size % 512 != 0) return refuse("virtual size " + std::to_string(size) + " not a multiple of 512");
  if (size > static_cast<uint64_t>(kMaxQcow2VirtualSize)) {
    return refuse("virtual size " + std::to_string(size) + " bytes above the " +
                  std::to_string(kMaxQcow2VirtualSize) + " allowed");
  }

  // compression_type (byte 104) is present only when header_length covers it,
  // and must be set exactly when the compression type bit is.
  if (head.size() < header_length) {
    return refuse("truncated header (header_length " + std::to_string(header_length) + ")");
  }
  const uint8_t compression_type = header_length > 104 ? head[104] : 0;
  if ((incompatible & kIncompatCompression) != 0 && compression_type == 0) {
    return refuse("compression type bit set without a compression_type");
  }
  if ((incompatible & kIncompatCompression) == 0 && compression_type != 0) {
    return refuse("compression_type set without the compression type bit");
  }
  if (compression_type > 1) return refuse("unknown compression_type " + std::to_string(compression_type));

  // Tables: aligned, bounded, and inside the file. qemu reads the whole L1
  // and refcount tables when it opens the image, so a file cut short shows
  // here rather than as a half-converted disk.
  const auto aligned = [&](uint64_t off) { return off % cluster_size == 0; };
  const auto inside = [&](uint64_t off, uint64_t len) { return off <= fsize && len <= fsize - off; };
  // The L1 table must map the whole virtual disk: each entry covers one L2
  // table of cluster_size / entry-size entries, each mapping one cluster.
  const uint64_t l2_entry_bytes = (incompatible & kIncompatExtendedL2) ? 16 : 8;
  const uint64_t bytes_per_l1_entry = (cluster_size / l2_entry_bytes) * cluster_size;  // <= 2^39
  const uint64_t l1_needed = (size + bytes_per_l1_entry - 1) / bytes_per_l1_entry;
  if (uint64_t{l1_size} * 8 > kMaxL1Bytes) return refuse("L1 table of " + std::to_string(l1_size) + " entries is too large");
  if (l1_size < l1_needed) {
    return refuse("L1 table of " + std::to_string(l1_size) + " entries does not cover the virtual size");
  }
  if (!aligned(l1_table_offset)) return refuse("L1 table offset not cluster-aligned");
  if (l1_table_offset == 0 && l1_size != 0) return refuse("L1 table at offset 0 (over the header)");
  if (!inside(l1_table_offset, uint64_t{l1_size} * 8)) return refuse("truncated L1 table (past the end of the file)");

  if (refcount_table_clusters == 0) return refuse("no refcount table");
  if (uint64_t{refcount_table_clusters} * cluster_size > kMaxRefcountTableBytes) {
    return refuse("refcount table of " + std::to_string(refcount_table_clusters) + " clusters is too large");
  }
  if (refcount_table_offset == 0 || !aligned(refcount_table_offset)) {
    return refuse("refcount table offset not a cluster after the header");
  }
  if (!inside(refcount_table_offset, uint64_t{refcount_table_clusters} * cluster_size)) {
    return refuse("truncated refcount table (past the end of the file)");
  }

  if (nb_snapshots > kMaxSnapshots) return refuse(std::to_string(nb_snapshots) + " snapshots (at most 65536)");
  if (nb_snapshots > 0 && (!aligned(snapshots_offset) || snapshots_offset == 0 || !inside(snapshots_offset, 1))) {
    return refuse("snapshot table outside the file");
  }

  // Header extensions, from the end of the header to the end of the first
  // cluster. qemu reads them all, whatever the version; an unknown one is
  // skipped, a known one that reaches outside the file is refused.
  const uint64_t ext_end = std::min<uint64_t>(cluster_size, fsize);
  if (head.size() < ext_end) {
    return refuse("header extensions not read (the first " + std::to_string(ext_end) + " bytes are needed, " +
                  std::to_string(head.size()) + " given)");
  }
  uint64_t at = header_length;
  while (at < ext_end) {
    if (ext_end - at < 8) return refuse("truncated header extension");
    const uint32_t type = be32(head, at);
    const uint32_t len = be32(head, at + 4);
    if (type == kExtEnd) break;
    at += 8;
    if (len > ext_end - at) return refuse("header extension " + hex(type) + " runs past the header cluster");
    if (type == kExtDataFile) return refuse("it has an external data file (data-file header extension)");
    if (type == kExtEncryption) return refuse("it is encrypted (full-disk-encryption header extension)");
    if (type == kExtBackingFormat) return refuse("it names a backing file format (backing-format header extension)");
    at += (uint64_t{len} + 7) / 8 * 8;
  }

  Qcow2Info info;
  info.virtual_size = static_cast<int64_t>(size);
  info.file_size = file_size;
  info.version = static_cast<int>(version);
  info.cluster_size = int64_t{1} << cluster_bits;
  return info;
}

}  // namespace kiln::boot
