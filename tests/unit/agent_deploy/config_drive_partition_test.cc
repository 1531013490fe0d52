// write_config_drive on disk files laid out by sfdisk as an image written on
// a larger disk leaves them (the table describes the image, not the disk),
// checked with tools that share no code with the writer: sfdisk --verify and
// --dump for the table, blkid at the partition's offset for the label,
// isoinfo for user-data. The ISO is kilnd's own (kiln_config_drive).

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/deploy/agent_seed.h"
#include "agent/deploy/config_drive_partition.h"
#include "controller/tenancy/config_drive.h"
#include "tests/support/cli_run.h"
#include "tests/support/skip.h"
#include "tests/unit/agent_checks/temp_tree.h"

using kiln::agent::ConfigDriveReport;
using kiln::agent::write_config_drive;
using kiln::test::TempTree;
using kiln::test::have_tool;
using kiln::test::run_command;

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
const kiln::Logger kQuiet(kiln::LogLevel::kOff);
const std::string kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq9kx1f7pZ8bC4oTb0FvZ7yJb1m2cQ7dWq8p0JqGq1a t@lab";

std::string drive() {
  kiln::ConfigDriveInput in;
  in.instance_id = "node-1";
  in.hostname = "gpu-01";
  in.access.ssh_keys = {kKey};
  auto iso = kiln::build_config_drive(in);
  REQUIRE(iso);
  return *iso;
}

void need_tools() {
  for (const char* t : {"sfdisk", "blkid", "isoinfo"})
    if (!have_tool(t)) KILN_SKIP(t << " is not installed (util-linux, genisoimage)");
}

// An "image" of `image_mib` partitioned by sfdisk with `script`, then grown
// to `disk_mib` as a larger disk would hold it, with the os agent's seed
// block at the disk's end (what write_image leaves when there is room).
std::string make_disk(const TempTree& t, const std::string& script, std::uint64_t image_mib, std::uint64_t disk_mib) {
  const std::string disk = t.path("disk.img");
  REQUIRE(run_command("truncate -s " + std::to_string(image_mib) + "M '" + disk + "'").status == 0);
  auto r = run_command("printf '" + script + "' | sfdisk -q '" + disk + "' 2>&1");
  INFO(r.out);
  REQUIRE(r.status == 0);
  REQUIRE(run_command("truncate -s " + std::to_string(disk_mib) + "M '" + disk + "'").status == 0);
  if (disk_mib > image_mib) {
    kiln::agent::AgentSeed seed;
    seed.os_secret = std::string(64, 'a');
    REQUIRE(kiln::agent::write_seed_block(disk, image_mib * kMiB, seed));
  }
  return disk;
}

void check_drive(const TempTree& t, const std::string& disk, const ConfigDriveReport& r) {
  auto verify = run_command("sfdisk --verify '" + disk + "' 2>&1");
  INFO(verify.out);
  CHECK(verify.status == 0);
  CHECK(verify.out.find("No errors detected") != std::string::npos);
  CHECK(verify.out.find("arning") == std::string::npos);
  auto b = run_command("blkid -p -o export -O " + std::to_string(r.offset) + " '" + disk + "'");
  INFO(b.out);
  CHECK(b.out.find("LABEL=cidata") != std::string::npos);
  CHECK(b.out.find("TYPE=iso9660") != std::string::npos);
  const std::string part = t.path("part.iso");
  REQUIRE(run_command("dd if='" + disk + "' of='" + part + "' bs=1M skip=" + std::to_string(r.offset / kMiB) +
                " count=" + std::to_string(r.size / kMiB) + " status=none")
              .status == 0);
  CHECK(run_command("isoinfo -R -i '" + part + "' -x /user-data").out.find(kKey) != std::string::npos);
  // The seed block moved to the partition's first 4 KiB.
  auto seed = kiln::agent::read_seed_block_at(disk, r.offset);
  REQUIRE(seed);
  CHECK(seed->os_secret == std::string(64, 'a'));
  CHECK(r.seed_moved);
}

// write_config_drive refuses `disk` with `code` and `words`, and leaves every byte as it was.
void refused(const std::string& disk, const std::string& iso, kiln::Code code, const std::string& words) {
  auto before = run_command("md5sum < '" + disk + "'").out;
  auto r = write_config_drive(disk, iso, kQuiet);
  REQUIRE(!r);
  CHECK(r.error().code == code);
  CHECK(r.error().message.find(words) != std::string::npos);
  CHECK(run_command("md5sum < '" + disk + "'").out == before);
}

}  // namespace

TEST_CASE("GPT: the backup header moves to the disk's end and a cidata partition ends there", "[config_drive]") {
  need_tools();
  TempTree t;
  const std::string disk = make_disk(t, "label: gpt\\nstart=2048, size=40960, type=L, name=root\\n", 64, 256);
  auto r = write_config_drive(disk, drive(), kQuiet);
  REQUIRE(r);
  CHECK(r->table == "gpt");
  CHECK(r->partition == 2);
  CHECK(r->size >= kMiB);  // the ISO rounded up to 1 MiB, from a 1 MiB-aligned start
  CHECK(r->size < 2 * kMiB);
  CHECK(r->offset + r->size == 256 * kMiB - 33 * 512);  // before the backup entries and header
  CHECK(r->offset % kMiB == 0);
  check_drive(t, disk, *r);
  auto dump = run_command("sfdisk --dump '" + disk + "'").out;
  INFO(dump);
  CHECK(dump.find("last-lba: " + std::to_string(256 * kMiB / 512 - 34)) != std::string::npos);
  CHECK(dump.find("type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=") != std::string::npos);
  CHECK(dump.find("name=\"cidata\"") != std::string::npos);
  CHECK(dump.find("name=\"root\"") != std::string::npos);
  // The seed is no longer at the disk's end: the backup GPT is.
  CHECK(!kiln::agent::read_seed_block(disk));

  SECTION("run again, the same partition takes the new ISO") {
    auto again = write_config_drive(disk, drive(), kQuiet);
    REQUIRE(again);
    CHECK(again->reused);
    CHECK(again->offset == r->offset);
    CHECK(again->partition == 2);
    check_drive(t, disk, *again);
  }
}

TEST_CASE("MBR: a primary partition at the end of the disk", "[config_drive]") {
  need_tools();
  TempTree t;
  const std::string disk = make_disk(t, "label: dos\\nstart=2048, type=c, bootable\\n", 64, 128);
  auto r = write_config_drive(disk, drive(), kQuiet);
  REQUIRE(r);
  CHECK(r->table == "dos");
  CHECK(r->partition == 2);
  CHECK(r->offset + r->size == 128 * kMiB);
  check_drive(t, disk, *r);
  auto dump = run_command("sfdisk --dump '" + disk + "' | tr -d ' '").out;
  INFO(dump);
  CHECK(dump.find("disk.img2:start=" + std::to_string(r->offset / 512) + ",size=" + std::to_string(r->size / 512) +
                  ",type=83") != std::string::npos);
  CHECK(dump.find("disk.img1:start=2048,size=129024,type=c,bootable") != std::string::npos);

  SECTION("the os agent finds the seed at the partition's start through sysfs") {
    t.write("sys/block/vda/size", std::to_string(128 * kMiB / 512) + "\n");
    t.write("sys/block/vda/removable", "0\n");
    t.write("sys/block/vda/vda1/start", "2048\n");
    t.write("sys/block/vda/vda2/start", std::to_string(r->offset / 512) + "\n");
    std::filesystem::create_directories(t.path("dev"));
    std::filesystem::rename(disk, t.path("dev/vda"));
    auto seed = kiln::agent::find_seed_on_disks(t.root());
    REQUIRE(seed);
    CHECK(seed->os_secret == std::string(64, 'a'));
  }
}

TEST_CASE("refused cleanly: no table, no free slot, no room", "[config_drive]") {
  need_tools();
  TempTree t;
  const std::string iso = drive();
  SECTION("a disk without a partition table") {
    const std::string disk = t.path("blank.img");
    REQUIRE(run_command("truncate -s 16M '" + disk + "'").status == 0);
    auto r = write_config_drive(disk, iso, kQuiet);
    REQUIRE(!r);
    CHECK(r.error().code == kiln::Code::kInvalidArgument);
    CHECK(r.error().message.find("no partition table") != std::string::npos);
  }
  SECTION("an MBR whose last slot is used") {
    const std::string disk = make_disk(
        t, "label: dos\\nstart=2048, size=2048, type=83\\nsize=2048, type=83\\nsize=2048, type=83\\nsize=2048, type=83\\n",
        16, 64);
    refused(disk, iso, kiln::Code::kUnprocessable, "no free primary slot");
  }
  SECTION("a GPT image that fills the disk") {
    const std::string disk = make_disk(t, "label: gpt\\nstart=2048, type=L\\n", 32, 32);
    refused(disk, iso, kiln::Code::kUnprocessable, "no room for the config drive");
  }
  SECTION("a GPT whose header was damaged") {
    const std::string disk = make_disk(t, "label: gpt\\nstart=2048, size=2048, type=L\\n", 16, 64);
    REQUIRE(run_command("printf 'X' | dd of='" + disk + "' bs=1 seek=600 conv=notrunc status=none").status == 0);
    refused(disk, iso, kiln::Code::kUnprocessable, "fails its CRC32");
  }
}
