// The config drive's NoCloud content, and the drive read back with isoinfo
// and blkid. The MIME message is parsed by Python's email package, the
// parser cloud-init itself uses, when python3 is there.

#include <catch2/catch.hpp>

#include "controller/tenancy/config_drive.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/cli_run.h"
#include "tests/support/skip.h"

using namespace kiln;
using kiln::test::have_tool;
using kiln::testing::ScratchDir;
using kiln::test::run_command;

namespace {

const std::string kKeyA = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq9kx1f7pZ8bC4oTb0FvZ7yJb1m2cQ7dWq8p0JqGq1a alice@lab";
const std::string kKeyB = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7 bob@lab";

ConfigDriveInput input(std::string user_data = "") {
  ConfigDriveInput in;
  in.instance_id = config_drive_instance_id("6f1c2d3e-0000-4000-8000-000000000001", "a1");
  in.hostname = config_drive_hostname("gpu-07", "6f1c2d3e-0000-4000-8000-000000000001");
  in.access.ssh_keys = {kKeyA, kKeyB};
  in.access.user_data = std::move(user_data);
  in.macs = {"52:54:00:77:00:01"};
  in.time = 1700000000;
  return in;
}

// Each part of a MIME user-data as "content-type|first line", as Python's
// email package (cloud-init's parser) walks it.
std::string mime_parts(const ScratchDir& dir, const std::string& user_data) {
  std::string file = dir.write("user-data", user_data);
  std::string py =
      "import email,sys\n"
      "m=email.message_from_string(open(sys.argv[1]).read())\n"
      "for p in m.walk():\n"
      "  if p.is_multipart(): continue\n"
      "  print(p.get_content_type()+'|'+p.get_payload().splitlines()[0])\n";
  std::string script = dir.write("parts.py", py);
  return run_command("python3 '" + script + "' '" + file + "'").out;
}

}  // namespace

TEST_CASE("meta-data names the instance and the host", "[config_drive]") {
  CHECK(config_drive_meta_data(input()) ==
        "instance-id: \"6f1c2d3e-0000-4000-8000-000000000001-a1\"\nlocal-hostname: \"gpu-07\"\n");
  CHECK(config_drive_instance_id("n1", "") == "n1");
}

TEST_CASE("a name that is not a hostname gives kiln-<id>", "[config_drive]") {
  CHECK(config_drive_hostname("rack1.gpu-07", "abcdef0123") == "rack1.gpu-07");
  CHECK(config_drive_hostname("gpu 07", "abcdef0123") == "kiln-abcdef01");
  CHECK(config_drive_hostname("-gpu", "abcdef0123") == "kiln-abcdef01");
  CHECK(config_drive_hostname("", "abcdef0123") == "kiln-abcdef01");
  CHECK(config_drive_hostname(std::string(64, 'a'), "abcdef0123") == "kiln-abcdef01");
}

TEST_CASE("without user data of the tenant's, user-data is one cloud-config", "[config_drive]") {
  TenantAccess a;
  a.ssh_keys = {kKeyA};
  CHECK(config_drive_user_data(a) == "#cloud-config\nssh_authorized_keys:\n  - \"" + kKeyA + "\"\n");
  CHECK(config_drive_user_data(TenantAccess{}) == "#cloud-config\nssh_authorized_keys: []\n");
}

TEST_CASE("the tenant's user data comes first in a multipart message, our keys last and appended",
          "[config_drive]") {
  TenantAccess a;
  a.ssh_keys = {kKeyA};
  a.user_data = "#cloud-config\npackages: [htop]\nssh_authorized_keys:\n  - ssh-ed25519 AAAA tenant@own\n";
  std::string ud = config_drive_user_data(a);
  CHECK(ud.rfind("Content-Type: multipart/mixed; boundary=\"==kiln-config-drive-0==\"\n", 0) == 0);
  std::size_t theirs = ud.find("packages: [htop]");
  std::size_t ours = ud.find(kKeyA);
  REQUIRE(theirs != std::string::npos);
  REQUIRE(ours != std::string::npos);
  CHECK(theirs < ours);
  CHECK(ud.find("merge_how: 'list(append)+dict(no_replace,recurse_list)+str()'") != std::string::npos);
  CHECK(ud.ends_with("\n--==kiln-config-drive-0==--\n"));
  if (!have_tool("python3")) KILN_SKIP("python3 is not installed (its email package checks the MIME)");
  ScratchDir dir;
  CHECK(mime_parts(dir, ud) == "text/plain|#cloud-config\ntext/cloud-config|#cloud-config\n");
}

TEST_CASE("a script, a boundary look-alike and a MIME message of the tenant's", "[config_drive]") {
  TenantAccess a;
  a.ssh_keys = {kKeyA};
  a.user_data = "#!/bin/sh\necho '--==kiln-config-drive-0==' >/tmp/x";  // no final newline
  std::string ud = config_drive_user_data(a);
  CHECK(ud.find("boundary=\"==kiln-config-drive-1==\"") != std::string::npos);
  CHECK(ud.find(">/tmp/x\n--==kiln-config-drive-1==\n") != std::string::npos);
  TenantAccess mime;
  mime.user_data =
      "Content-Type: multipart/mixed; boundary=\"XYZ\"\nMIME-Version: 1.0\n\n--XYZ\n"
      "Content-Type: text/x-shellscript\n\n#!/bin/sh\necho hi\n--XYZ--\n";
  std::string nested = config_drive_user_data(mime);
  CHECK(nested.find("Content-Type: text/plain") == std::string::npos);
  if (!have_tool("python3")) KILN_SKIP("python3 is not installed (its email package checks the MIME)");
  ScratchDir dir;
  CHECK(mime_parts(dir, ud) == "text/plain|#!/bin/sh\ntext/cloud-config|#cloud-config\n");
  CHECK(mime_parts(dir, nested) == "text/x-shellscript|#!/bin/sh\ntext/cloud-config|#cloud-config\n");
}

TEST_CASE("network-config asks for DHCP on each of the node's ports, by MAC, none optional",
          "[config_drive]") {
  CHECK(config_drive_network_config({"52:54:00:77:00:01", "0C:42:A1:00:00:0F"}) ==
        "version: 2\nethernets:\n"
        "  kiln-port-0:\n    match:\n      macaddress: \"52:54:00:77:00:01\"\n    dhcp4: true\n"
        "  kiln-port-1:\n    match:\n      macaddress: \"0c:42:a1:00:00:0f\"\n    dhcp4: true\n");
  // Not a MAC: never written into the YAML.
  std::string odd = config_drive_network_config({"52:54:00:77:00:01\"\n  x: y", "52:54:00:77:00:0g"});
  CHECK(odd.find("x: y") == std::string::npos);
  CHECK(odd.find("kiln-port") == std::string::npos);
}

TEST_CASE("network-config without known ports asks for DHCP on every ethernet NIC, optional",
          "[config_drive]") {
  std::string n = config_drive_network_config();
  CHECK(n.rfind("version: 2\n", 0) == 0);
  CHECK(n.find("name: \"e*\"") != std::string::npos);
  CHECK(n.find("dhcp4: true") != std::string::npos);
  CHECK(n.find("optional: true") != std::string::npos);
}

TEST_CASE("the drive is an ISO labelled cidata whose user-data holds the keys", "[config_drive]") {
  auto iso = build_config_drive(input());
  REQUIRE(iso);
  CHECK(iso->size() < 64 * 1024);
  if (!have_tool("blkid") || !have_tool("isoinfo")) KILN_SKIP("blkid or isoinfo (genisoimage) is not installed");
  ScratchDir dir;
  std::string file = dir.write("cidata.iso", *iso);
  auto b = run_command("blkid -p -o export '" + file + "'");
  CHECK(b.out.find("LABEL=cidata") != std::string::npos);
  CHECK(b.out.find("TYPE=iso9660") != std::string::npos);
  auto ud = run_command("isoinfo -R -i '" + file + "' -x /user-data").out;
  CHECK(ud.find(kKeyA) != std::string::npos);
  CHECK(ud.find(kKeyB) != std::string::npos);
  CHECK(run_command("isoinfo -R -i '" + file + "' -x /meta-data").out == config_drive_meta_data(input()));
  CHECK(run_command("isoinfo -R -i '" + file + "' -x /network-config").out == config_drive_network_config({"52:54:00:77:00:01"}));
}

TEST_CASE("user data that would make the drive too large is refused, naming user_data", "[config_drive]") {
  auto iso = build_config_drive(input("#!/bin/sh\n" + std::string(kConfigDriveMaxBytes, 'x')));
  REQUIRE(!iso);
  CHECK(iso.error().fields.at(0).field == "user_data");
}

TEST_CASE("the drive's user-data carries the deploy's phone_home URL in our part", "[config_drive]") {
  const std::string url = "https://kiln.lab:8443/v1/phone-home/6f1c2d3e-0000-4000-8000-000000000001." + std::string(64, 'e');
  const std::string block = "phone_home:\n  url: \"" + url +
                            "\"\n  post: [pub_key_rsa, pub_key_ecdsa, pub_key_ed25519, instance_id, hostname]\n"
                            "  tries: 10\n";
  CHECK(phone_home_cloud_config(url) == block);
  CHECK(phone_home_cloud_config("").empty());
  TenantAccess a;
  a.ssh_keys = {kKeyA};
  CHECK(config_drive_user_data(a, url) == "#cloud-config\nssh_authorized_keys:\n  - \"" + kKeyA + "\"\n" + block);
  // With the tenant's user data, in our (last) part.
  a.user_data = "#!/bin/sh\necho hi\n";
  std::string mixed = config_drive_user_data(a, url);
  CHECK(mixed.find(block) > mixed.find("echo hi"));
  ConfigDriveInput in = input();
  in.phone_home_url = url;
  auto iso = build_config_drive(in);
  REQUIRE(iso);
  if (!have_tool("isoinfo")) KILN_SKIP("isoinfo (genisoimage) is not installed");
  ScratchDir dir;
  std::string file = dir.write("cidata.iso", *iso);
  CHECK(run_command("isoinfo -R -i '" + file + "' -x /user-data").out.find(block) != std::string::npos);
  // cloud-init reads it as YAML: the block is what cc_phone_home.py looks up.
  if (!have_tool("python3") || run_command("python3 -c 'import yaml'").status != 0)
    KILN_SKIP("python3 with yaml (cloud-init's YAML reader) is not installed");
  std::string ud = dir.write("user-data", config_drive_user_data(TenantAccess{}, url));
  std::string py = dir.write("ph.py",
                             "import yaml,sys\n"
                             "c=yaml.safe_load(open(sys.argv[1]))['phone_home']\n"
                             "print(c['url']);print(','.join(c['post']));print(c['tries'])\n");
  CHECK(run_command("python3 '" + py + "' '" + ud + "'").out ==
        url + "\npub_key_rsa,pub_key_ecdsa,pub_key_ed25519,instance_id,hostname\n10\n");
}
