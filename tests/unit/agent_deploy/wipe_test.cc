// wipe against a regular file standing in for a disk: a real GPT (CRCs and
// backup header included, as blkid checks them) with two partitions, each
// holding an ext4 made by mkfs.ext4, then wipe, then blkid must find nothing
// on the disk or at either partition's offset, and the wiped bytes must read
// back as zero.
#include <catch2/catch.hpp>

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "agent/deploy/block_device.h"
#include "agent/deploy/wipe.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::test::TempTree;

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

void put_le(std::string& s, std::size_t at, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Writes a protective MBR, primary and backup GPT (512-byte sectors) listing
// `parts` ([first_lba, last_lba]) into the file at `path` of `size` bytes.
void write_gpt(const std::string& path, std::uint64_t size, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& parts) {
  const std::uint64_t lbas = size / 512, last = lbas - 1;
  std::string entries(128 * 128, '\0');
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::size_t at = i * 128;
    // Linux filesystem data type GUID 0FC63DAF-8483-4772-8E79-3D69D8477DE4 (mixed endian).
    const unsigned char type[16] = {0xAF, 0x3D, 0xC6, 0x0F, 0x83, 0x84, 0x72, 0x47,
                                    0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47, 0x7D, 0xE4};
    std::memcpy(&entries[at], type, 16);
    for (int b = 0; b < 16; ++b) entries[at + 16 + b] = static_cast<char>(0x10 + i * 16 + b);
    put_le(entries, at + 32, parts[i].first, 8);
    put_le(entries, at + 40, parts[i].second, 8);
  }
  const std::uint32_t entries_crc = crc32(0, reinterpret_cast<const Bytef*>(entries.data()), entries.size());
  auto header = [&](std::uint64_t my_lba, std::uint64_t alt_lba, std::uint64_t entries_lba) {
    std::string h(512, '\0');
    std::memcpy(&h[0], "EFI PART", 8);
    put_le(h, 8, 0x00010000, 4);
    put_le(h, 12, 92, 4);
    put_le(h, 24, my_lba, 8);
    put_le(h, 32, alt_lba, 8);
    put_le(h, 40, 34, 8);
    put_le(h, 48, last - 33, 8);
    for (int b = 0; b < 16; ++b) h[56 + b] = static_cast<char>(0xA0 + b);
    put_le(h, 72, entries_lba, 8);
    put_le(h, 80, 128, 4);
    put_le(h, 84, 128, 4);
    put_le(h, 88, entries_crc, 4);
    put_le(h, 16, crc32(0, reinterpret_cast<const Bytef*>(h.data()), 92), 4);
    return h;
  };
  std::string mbr(512, '\0');
  mbr[446 + 4] = static_cast<char>(0xEE);
  put_le(mbr, 446 + 8, 1, 4);
  put_le(mbr, 446 + 12, std::min<std::uint64_t>(lbas - 1, 0xFFFFFFFF), 4);
  mbr[510] = 0x55;
  mbr[511] = static_cast<char>(0xAA);

  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(f);
  auto put = [&](std::uint64_t lba, const std::string& data) {
    f.seekp(static_cast<std::streamoff>(lba * 512));
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  };
  put(0, mbr);
  put(1, header(1, last, 2));
  put(2, entries);
  put(last - 32, entries);
  put(last, header(last, 1, last - 32));
  REQUIRE(f.good());
}

void make_file(const std::string& path, std::uint64_t size, char fill) {
  std::ofstream out(path, std::ios::binary);
  std::string chunk(kMiB, fill);
  for (std::uint64_t i = 0; i < size / kMiB; ++i) out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  out.write(chunk.data(), static_cast<std::streamsize>(size % kMiB));
  REQUIRE(out.good());
}

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// blkid's verdict: 0 found something, 2 found nothing.
int blkid_probe(const std::string& path, std::uint64_t offset = 0) {
  const int rc = sh("blkid -p -O " + std::to_string(offset) + " " + path);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool all_zero(const std::string& path, std::uint64_t offset, std::uint64_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string buf(n, '\x01');
  in.read(buf.data(), static_cast<std::streamsize>(n));
  REQUIRE(in.gcount() == static_cast<std::streamsize>(n));
  return buf.find_first_not_of('\0') == std::string::npos;
}

}  // namespace

TEST_CASE("wipe removes a GPT and the ext4 filesystems in its partitions", "[wipe]") {
  TempTree t;
  const std::string disk = t.path("disk.img");
  const std::uint64_t size = 64 * kMiB;
  make_file(disk, size, '\0');
  // Partition 1: 1 MiB .. 33 MiB, partition 2: 40 MiB .. 62 MiB (its superblock is
  // far from either disk edge: only partition-aware wiping removes it).
  write_gpt(disk, size, {{2048, 67583}, {81920, 126975}});
  REQUIRE(sh("mkfs.ext4 -q -F -E offset=" + std::to_string(1 * kMiB) + " " + disk + " 16M") == 0);
  REQUIRE(sh("mkfs.ext4 -q -F -E offset=" + std::to_string(40 * kMiB) + " " + disk + " 8M") == 0);
  REQUIRE(blkid_probe(disk) == 0);                // the GPT
  REQUIRE(blkid_probe(disk, 1 * kMiB) == 0);      // ext4 in partition 1
  REQUIRE(blkid_probe(disk, 40 * kMiB) == 0);     // ext4 in partition 2
  {
    auto dev = kiln::agent::BlockDevice::open(disk);
    REQUIRE(dev);
    const auto parts = kiln::agent::partition_extents(*dev);
    REQUIRE(parts.size() == 2);
    CHECK(parts[1].first == 40 * kMiB);
    CHECK(parts[1].second == 62 * kMiB);
  }

  const auto r = kiln::agent::wipe_device(disk, {}, kiln::Logger(kiln::LogLevel::kOff));
  INFO(r.error);
  CHECK(r.verified);
  CHECK(r.error.empty());
  CHECK(r.size_bytes == size);
  CHECK(r.partitions == 2);
  CHECK_FALSE(r.discarded);  // a regular file has no BLKDISCARD
  CHECK_FALSE(r.overwritten);

  CHECK(blkid_probe(disk) == 2);
  CHECK(blkid_probe(disk, 1 * kMiB) == 2);
  CHECK(blkid_probe(disk, 40 * kMiB) == 2);
  CHECK(all_zero(disk, 0, kMiB));
  CHECK(all_zero(disk, size - kMiB, kMiB));
  CHECK(all_zero(disk, 40 * kMiB, kMiB));
  CHECK(sh("wipefs -n " + disk + " | grep -q .") != 0);  // wipefs lists nothing either
}

TEST_CASE("wipe also clears an MBR table's partition starts", "[wipe]") {
  TempTree t;
  const std::string disk = t.path("mbr.img");
  make_file(disk, 32 * kMiB, '\0');
  std::string mbr(512, '\0');
  mbr[446 + 4] = static_cast<char>(0x83);
  put_le(mbr, 446 + 8, 16384, 4);  // 8 MiB
  put_le(mbr, 446 + 12, 32768, 4);
  mbr[510] = 0x55;
  mbr[511] = static_cast<char>(0xAA);
  {
    std::fstream f(disk, std::ios::in | std::ios::out | std::ios::binary);
    f.write(mbr.data(), 512);
  }
  REQUIRE(sh("mkfs.ext4 -q -F -E offset=" + std::to_string(8 * kMiB) + " " + disk + " 8M") == 0);
  REQUIRE(blkid_probe(disk, 8 * kMiB) == 0);
  const auto r = kiln::agent::wipe_device(disk, {}, kiln::Logger(kiln::LogLevel::kOff));
  CHECK(r.verified);
  CHECK(r.partitions == 1);
  CHECK(blkid_probe(disk) == 2);
  CHECK(blkid_probe(disk, 8 * kMiB) == 2);
}

TEST_CASE("wipe with full overwrite zeroes every byte", "[wipe]") {
  TempTree t;
  const std::string disk = t.path("full.img");
  make_file(disk, 8 * kMiB + 4096, '\x5a');
  kiln::agent::WipeOptions o;
  o.full_overwrite = true;
  const auto r = kiln::agent::wipe_device(disk, o, kiln::Logger(kiln::LogLevel::kOff));
  CHECK(r.verified);
  CHECK(r.overwritten);
  CHECK(all_zero(disk, 0, 8 * kMiB + 4096));
}

TEST_CASE("wipe of a missing device reports the error, unverified", "[wipe]") {
  const auto r = kiln::agent::wipe_device("/nonexistent/kiln-disk", {}, kiln::Logger(kiln::LogLevel::kOff));
  CHECK_FALSE(r.verified);
  CHECK(r.error.find("No such file") != std::string::npos);
  CHECK(kiln::agent::to_json(r)["error"].is_string());
}

TEST_CASE("kiln-agent wipe --device wipes a file and prints the report", "[wipe][cli]") {
  TempTree t;
  const std::string disk = t.path("cli.img");
  make_file(disk, 16 * kMiB, '\0');
  write_gpt(disk, 16 * kMiB, {{2048, 30000}});
  REQUIRE(blkid_probe(disk) == 0);
  REQUIRE(sh(std::string(KILN_AGENT_BIN) + " wipe --device " + disk) == 0);
  CHECK(blkid_probe(disk) == 2);
}

TEST_CASE("wipe_all_disks wipes every eligible disk under the root and skips removable ones", "[wipe]") {
  TempTree t;
  // Device nodes live under the same root as /sys: regular files here.
  t.mkdir("dev");
  for (const char* name : {"sda", "nvme0n1", "sdb"}) {
    t.write(std::string("sys/block/") + name + "/size", std::to_string(16 * kMiB / 512) + "\n");
    t.write(std::string("sys/block/") + name + "/removable", std::string(name) == "sdb" ? "1\n" : "0\n");
    make_file(t.path(std::string("dev/") + name), 16 * kMiB, '\x77');
  }
  t.write("sys/block/loop0/size", "2048\n");
  write_gpt(t.path("dev/sda"), 16 * kMiB, {{2048, 30000}});
  REQUIRE(blkid_probe(t.path("dev/sda")) == 0);

  const auto r = kiln::agent::wipe_all_disks(t.root(), {}, kiln::Logger(kiln::LogLevel::kOff));
  CHECK(r.error.empty());
  const auto& disks = r.result["disks"];
  REQUIRE(disks.size() == 2);
  CHECK(disks[0]["name"] == "nvme0n1");
  CHECK(disks[1]["name"] == "sda");
  for (const auto& d : disks) {
    CHECK(d["verified"] == true);
    CHECK(d["size_bytes"] == 16 * kMiB);
    CHECK(d["discarded"] == false);
    CHECK(d["overwritten"] == false);
  }
  CHECK(blkid_probe(t.path("dev/sda")) == 2);
  CHECK(all_zero(t.path("dev/nvme0n1"), 0, kMiB));
  CHECK_FALSE(all_zero(t.path("dev/sdb"), 0, kMiB));  // removable: untouched
}
