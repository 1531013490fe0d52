// The ISO 9660 writer, checked with tools that share no code with it:
// blkid (util-linux) for the label, isoinfo (genisoimage) for the Rock Ridge
// names and contents, and the kernel's isofs through a loop mount (as root).

#include <unistd.h>

#include <catch2/catch.hpp>

#include "controller/tenancy/iso9660.h"
#include "tests/support/cli_run.h"
#include "tests/support/skip.h"
#include "tests/support/scratch_dir.h"

using kiln::build_iso9660;
using kiln::IsoFile;
using kiln::IsoVolume;
using kiln::test::have_tool;
using kiln::test::run_command;
using kiln::testing::ScratchDir;

namespace {

IsoVolume sample() {
  IsoVolume v;
  v.label = "cidata";
  v.time = 1700000000;  // 2023-11-14T22:13:20Z
  std::string binary;
  for (int i = 0; i < 5000; ++i) binary += static_cast<char>(i * 7);
  v.files = {{"user-data", "#cloud-config\nssh_authorized_keys: []\n"},
             {"meta-data", "instance-id: \"n1\"\n"},
             {"network-config", "version: 2\n"},
             {"empty", ""},
             {"blob.bin", binary}};
  return v;
}

std::string isoinfo_extract(const std::string& image, const std::string& path) {
  return run_command("isoinfo -R -i '" + image + "' -x '" + path + "'").out;
}

}  // namespace

TEST_CASE("the image is block-sized, and blkid calls it iso9660 with the label", "[iso9660]") {
  auto iso = build_iso9660(sample());
  REQUIRE(iso);
  CHECK(iso->size() % kiln::kIsoBlock == 0);
  CHECK(iso->substr(16 * 2048 + 1, 5) == "CD001");
  if (!have_tool("blkid")) KILN_SKIP("blkid (util-linux) is not installed");
  ScratchDir dir;
  std::string file = dir.write("cd.iso", *iso);
  auto r = run_command("blkid -p -o export '" + file + "'");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("TYPE=iso9660") != std::string::npos);
  CHECK(r.out.find("LABEL=cidata") != std::string::npos);
}

TEST_CASE("isoinfo reads every file back by its Rock Ridge name", "[iso9660]") {
  if (!have_tool("isoinfo")) KILN_SKIP("isoinfo (genisoimage) is not installed");
  IsoVolume v = sample();
  auto iso = build_iso9660(v);
  REQUIRE(iso);
  ScratchDir dir;
  std::string file = dir.write("cd.iso", *iso);
  auto d = run_command("isoinfo -d -i '" + file + "'");
  INFO(d.out);
  CHECK(d.out.find("Volume id: cidata") != std::string::npos);
  CHECK(d.out.find("Rock Ridge signatures version 1 found") != std::string::npos);
  auto list = run_command("isoinfo -R -f -i '" + file + "'");
  INFO(list.out);
  for (const IsoFile& f : v.files) {
    CHECK(list.out.find("/" + f.name + "\n") != std::string::npos);
    CHECK(isoinfo_extract(file, "/" + f.name) == f.content);
  }
}

TEST_CASE("names that clash as 8.3 identifiers stay apart", "[iso9660]") {
  CHECK(kiln::iso_identifier_base("user-data") == "USER_DAT");
  CHECK(kiln::iso_identifier_base("network-config") == "NETWORK_");
  CHECK(kiln::iso_identifier_base("blob.bin") == "BLOB.BIN");
  if (!have_tool("isoinfo")) KILN_SKIP("isoinfo (genisoimage) is not installed");
  IsoVolume v;
  v.label = "cidata";
  v.files = {{"user-data", "one"}, {"user-data2", "two"}, {"user-datum", "three"}};
  auto iso = build_iso9660(v);
  REQUIRE(iso);
  ScratchDir dir;
  std::string file = dir.write("cd.iso", *iso);
  auto plain = run_command("isoinfo -f -i '" + file + "'");  // ISO 9660 names, no Rock Ridge
  INFO(plain.out);
  CHECK(plain.out.find("/USER_DAT.;1") != std::string::npos);
  CHECK(plain.out.find("/USER_DA1.;1") != std::string::npos);
  CHECK(plain.out.find("/USER_DA2.;1") != std::string::npos);
  for (const IsoFile& f : v.files) CHECK(isoinfo_extract(file, "/" + f.name) == f.content);
}

TEST_CASE("a root directory of many files spans several blocks and stays readable", "[iso9660]") {
  if (!have_tool("isoinfo")) KILN_SKIP("isoinfo (genisoimage) is not installed");
  IsoVolume v;
  v.label = "cidata";
  for (int i = 0; i < 80; ++i)
    v.files.push_back({"file-" + std::to_string(i) + "-with-a-longer-name.txt", "content " + std::to_string(i)});
  auto iso = build_iso9660(v);
  REQUIRE(iso);
  ScratchDir dir;
  std::string file = dir.write("cd.iso", *iso);
  auto list = run_command("isoinfo -R -f -i '" + file + "'");
  int listed = 0;
  for (const IsoFile& f : v.files) listed += list.out.find("/" + f.name + "\n") != std::string::npos ? 1 : 0;
  CHECK(listed == 80);
  CHECK(isoinfo_extract(file, "/file-79-with-a-longer-name.txt") == "content 79");
}

TEST_CASE("bad labels and names are refused, naming the field", "[iso9660]") {
  IsoVolume v = sample();
  v.label = std::string(33, 'a');
  auto r = build_iso9660(v);
  REQUIRE(!r);
  CHECK(r.error().fields.at(0).field == "label");
  v = sample();
  v.files[1].name = "a/b";
  r = build_iso9660(v);
  REQUIRE(!r);
  CHECK(r.error().fields.at(0).field == "files/1/name");
  v = sample();
  v.files[2].name = v.files[0].name;
  r = build_iso9660(v);
  REQUIRE(!r);
  CHECK(r.error().fields.at(0).field == "files/2/name");
  v = sample();
  v.files[0].name = "..";
  CHECK(!build_iso9660(v));
}

TEST_CASE("the same volume gives the same bytes", "[iso9660]") {
  auto a = build_iso9660(sample());
  auto b = build_iso9660(sample());
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == *b);
}

TEST_CASE("Linux's isofs mounts it and shows the Rock Ridge names", "[iso9660][root]") {
  if (geteuid() != 0) KILN_SKIP("a loop mount needs root");
  IsoVolume v = sample();
  auto iso = build_iso9660(v);
  REQUIRE(iso);
  ScratchDir dir;
  std::string file = dir.write("cd.iso", *iso);
  std::string mnt = dir.path() + "/mnt";
  REQUIRE(run_command("mkdir -p '" + mnt + "'").status == 0);
  auto m = run_command("mount -t iso9660 -o loop,ro '" + file + "' '" + mnt + "' 2>&1");
  if (m.status != 0) {
    // Ours failed: it is our image's fault only if a reference image mounts.
    if (!have_tool("genisoimage")) KILN_SKIP("cannot loop-mount here (" << m.out << ") and no genisoimage to tell why");
    run_command("mkdir -p '" + dir.path() + "/ref' && echo x > '" + dir.path() + "/ref/user-data'");
    run_command("genisoimage -quiet -V cidata -r -o '" + dir.path() + "/ref.iso' '" + dir.path() + "/ref'");
    auto ref = run_command("mount -t iso9660 -o loop,ro '" + dir.path() + "/ref.iso' '" + mnt + "' 2>&1");
    if (ref.status != 0) KILN_SKIP("loop mounts fail here: " << ref.out);
    run_command("umount '" + mnt + "'");
    FAIL("genisoimage's image mounts but ours does not: " << m.out);
  }
  auto listing = run_command("ls '" + mnt + "'");
  auto content = run_command("cat '" + mnt + "/user-data'");
  auto mode = run_command("stat -c %a '" + mnt + "/user-data'");
  auto label = run_command("blkid -o value -s LABEL \"$(findmnt -n -o SOURCE '" + mnt + "')\"");
  run_command("umount '" + mnt + "'");
  INFO(listing.out);
  CHECK(listing.out.find("user-data\n") != std::string::npos);
  CHECK(listing.out.find("network-config\n") != std::string::npos);
  CHECK(content.out == v.files[0].content);
  CHECK(mode.out == "444\n");
  CHECK(label.out == "cidata\n");
}
