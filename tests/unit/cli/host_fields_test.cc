// The values the CLI writes into other programs' files: each type refuses
// every byte a reader (ssh_config, Ansible INI, MPI hostfile, known_hosts)
// could give a meaning to, and keeps what a real cluster has.
#include <catch2/catch.hpp>

#include "cli/host_fields.h"
#include "cli/known_hosts_writer.h"
#include "cli/ssh_config_writer.h"
#include "common/crypto.h"

using namespace kiln::cli;
using kiln::Result;
using kiln::Status;

namespace {

// What a hostile agent, BMC or API could put in any of these strings.
std::vector<std::string> hostile_values() {
  return {
      "",
      "w0\nProxyCommand sh -c 'id>/tmp/pwned'",
      "w0\r",
      "w0\rProxyCommand id",
      std::string("w0\0ProxyCommand id", 18),
      std::string("10.0.0.5\0", 9),
      "fe80::1%eth0",
      "fe80::1%eth0\nProxyCommand sh -c id",
      "w 0",
      " w0",
      "w0 ",
      "w\t0",
      "w\"0",
      "w'0",
      "w#0",
      "w=0",
      "w\\0",
      "w;0",
      "w,0",
      "w*",
      "w?",
      "!w0",
      "w[0:3]",
      "[w0]",
      "@cert-authority",
      "|1|abc",
      "w%h",
      "w${HOME}",
      "w`id`",
      "w/0",
      "w\xc3\xa9",            // UTF-8 é
      "w\xff\xfe",            // not UTF-8
      "\xef\xbc\x91\x30.0.0.5",  // full-width 1
      "-oProxyCommand=id",
      std::string(5000, 'a'),
  };
}

}  // namespace

TEST_CASE("host fields: a host alias is a strict token") {
  for (const char* ok : {"w0", "gpu-01", "node.rack-3.example", "N_1", "a", "10.0.0.5"}) {
    Result<HostAlias> a = HostAlias::parse(ok);
    REQUIRE(a);
    CHECK(a->str() == ok);
  }
  CHECK(HostAlias::parse(std::string(255, 'a')));
  CHECK_FALSE(HostAlias::parse(std::string(256, 'a')));
  CHECK_FALSE(HostAlias::parse(".hidden"));
  CHECK_FALSE(HostAlias::parse("-w0"));
  CHECK_FALSE(HostAlias::parse("w~0"));  // kilnd allows '~' in node names; no reader needs it
  CHECK_FALSE(HostAlias::parse("fd00::9"));
  for (const std::string& h : hostile_values()) CHECK_FALSE(HostAlias::parse(h));
}

TEST_CASE("host fields: an address is an IP literal, held canonical, without scope id or port") {
  CHECK(IpLiteral::parse("10.0.0.5")->str() == "10.0.0.5");
  CHECK_FALSE(IpLiteral::parse("10.0.0.5")->is_v6());
  CHECK(IpLiteral::parse("fd00::9")->str() == "fd00::9");
  CHECK(IpLiteral::parse("fd00::9")->is_v6());
  CHECK(IpLiteral::parse("FD00:0:0::9")->str() == "fd00::9");
  CHECK(IpLiteral::parse("2001:db8:0:0:0:0:0:1")->str() == "2001:db8::1");
  CHECK(IpLiteral::parse("fe80::1")->str() == "fe80::1");  // kilnd drops it; harmless in a file
  // No host is reached at these (kilnd's own address rule, one home).
  for (const char* unusable : {"::", "0.0.0.0", "224.0.0.1", "ff02::1", "255.255.255.255", "::ffff:192.0.2.1"})
    CHECK_FALSE(IpLiteral::parse(unusable));
  for (const char* bad : {"010.0.0.1", "1.2.3", "256.0.0.1", "1.2.3.4.", "0x1.2.3.4", "10.0.0.5:22", "[fd00::9]",
                          "fd00::9/64", "1::2::3", "1::2:3:4:5:6:7:8", "localhost", "host.example", "fe80::1%25eth0"})
    CHECK_FALSE(IpLiteral::parse(bad));
  for (const std::string& h : hostile_values()) CHECK_FALSE(IpLiteral::parse(h));
  // The message quotes the value with every control byte escaped: one line.
  Result<IpLiteral> r = IpLiteral::parse("fe80::1%eth0\nProxyCommand sh -c id");
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "\"fe80::1%eth0\\nProxyCommand sh -c id\" is not an IP address");
}

TEST_CASE("host fields: a login is a POSIX user name") {
  for (const char* ok : {"ubuntu", "_svc", "ci-runner_2", "a"}) CHECK(LoginName::parse(ok));
  CHECK(LoginName::parse(std::string(32, 'u')));
  CHECK_FALSE(LoginName::parse(std::string(33, 'u')));
  for (const char* bad : {"Ubuntu", "1user", "-oProxyCommand", "user@host", "us.er", "root:x"})
    CHECK_FALSE(LoginName::parse(bad));
  for (const std::string& h : hostile_values()) CHECK_FALSE(LoginName::parse(h));
}

TEST_CASE("host fields: slots come from a bounded GPU count, group names are tokens") {
  CHECK(SlotCount::from_gpus(0)->value() == 1);
  CHECK(SlotCount::from_gpus(8)->value() == 8);
  CHECK(SlotCount::from_gpus(SlotCount::kMax)->value() == SlotCount::kMax);
  CHECK_FALSE(SlotCount::from_gpus(-1));
  CHECK_FALSE(SlotCount::from_gpus(SlotCount::kMax + 1));
  CHECK_FALSE(SlotCount::from_gpus(INT64_MAX));
  CHECK(GroupName::parse("workers"));
  CHECK(GroupName::parse("dev-box_2"));
  CHECK_FALSE(GroupName::parse("a.b"));
  CHECK_FALSE(GroupName::parse(std::string(64, 'g')));
  for (const std::string& h : hostile_values()) CHECK_FALSE(GroupName::parse(h));
}

TEST_CASE("host fields: describe_value escapes every unprintable byte and bounds the length") {
  CHECK(describe_value("ok") == "\"ok\"");
  CHECK(describe_value(std::string("a\n\r\t\0\"\\\x1b\xff", 9)) == "\"a\\n\\r\\t\\0\\\"\\\\\\x1b\\xff\"");
  const std::string long_one = describe_value(std::string(1000, 'x'));
  CHECK(long_one == "\"" + std::string(80, 'x') + "\"...");
}

TEST_CASE("ssh_config path: absolute printable paths are quoted with % doubled, the rest refused") {
  CHECK(SshConfigPath::parse("/tmp/c/known_hosts")->quoted() == "\"/tmp/c/known_hosts\"");
  CHECK(SshConfigPath::parse("/tmp/a b/100%/kh")->quoted() == "\"/tmp/a b/100%%/kh\"");
  CHECK(SshConfigPath::parse("/tmp/it's#here=1")->quoted() == "\"/tmp/it's#here=1\"");
  for (const char* bad : {"", "known_hosts", "~/kh", "/tmp/a\"b", "/tmp/a\\b", "/tmp/${HOME}", "/tmp/a\nb",
                          "/tmp/a\rb", "/tmp/\xc3\xa9", "/tmp/\x7f"})
    CHECK_FALSE(SshConfigPath::parse(bad));
  CHECK_FALSE(SshConfigPath::parse(std::string("/tmp/a\0b", 8)));
  CHECK_FALSE(SshConfigPath::parse("/" + std::string(4096, 'a')));
}

TEST_CASE("ssh_config writer: hosts, users, comments for nodes without an address, pinned host keys") {
  std::vector<SshConfigHost> hosts = {
      {*HostAlias::parse("w0"), *IpLiteral::parse("10.0.0.5"), *LoginName::parse("ubuntu")},
      {*HostAlias::parse("w1"), std::nullopt, std::nullopt},
      {*HostAlias::parse("d0"), *IpLiteral::parse("FD00::9"), std::nullopt},
  };
  CHECK(ssh_config_text(hosts) ==
        "Host w0\n  HostName 10.0.0.5\n  User ubuntu\n\n# w1: no address reported yet\nHost d0\n  HostName fd00::9\n\n");
  SshConfigOptions pinned{*SshConfigPath::parse("/o/known_hosts")};
  CHECK(ssh_config_text({hosts[0]}, pinned) ==
        "Host w0\n  HostName 10.0.0.5\n  User ubuntu\n  StrictHostKeyChecking yes\n"
        "  UserKnownHostsFile \"/o/known_hosts\"\n\n");
}

namespace {
// An ed25519 public key blob (any valid one; the writer checks its shape).
const char* kEd25519 = "AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8";
}  // namespace

TEST_CASE("known_hosts writer: names, type and key are checked before a line is written") {
  Result<std::string> line = known_hosts_line({"w0", "10.0.0.5", "FD00::9"}, "ssh-ed25519", kEd25519);
  REQUIRE(line);
  CHECK(*line == std::string("w0,10.0.0.5,fd00::9 ssh-ed25519 ") + kEd25519 + "\n");

  // Every hostile name is refused, naming its index.
  for (const std::string& h : hostile_values()) {
    Result<std::string> r = known_hosts_line({"w0", h}, "ssh-ed25519", kEd25519);
    REQUIRE_FALSE(r);
    CHECK(r.error().fields.at(0).field == "names/1");
  }
  CHECK(known_hosts_line({}, "ssh-ed25519", kEd25519).error().fields.at(0).field == "names");
  CHECK_FALSE(known_hosts_line(std::vector<std::string>(65, "w0"), "ssh-ed25519", kEd25519));

  // Types: OpenSSH host key types only.
  for (const char* t : {"ssh-dss", "ssh-ed25519-cert-v01@openssh.com", "SSH-ED25519", "ssh-ed25519 ", "",
                        "@cert-authority", "ssh-ed25519\nProxyCommand"}) {
    Result<std::string> r = known_hosts_line({"w0"}, t, kEd25519);
    REQUIRE_FALSE(r);
    CHECK(r.error().fields.at(0).field == "type");
  }
  // Keys: strict canonical base64 that holds a key of the named type.
  const std::string k = kEd25519;
  for (const std::string& bad : {std::string(""), k + "\n", k + " comment", " " + k, k.substr(0, k.size() - 4),
                                 k.substr(0, 10) + "\n" + k.substr(10), k.substr(0, 10) + "=" + k.substr(11),
                                 std::string("AAAA"), std::string("AAAAB3NzaC1yc2E="), std::string(16388, 'A')}) {
    INFO(bad.substr(0, 80));
    Result<std::string> r = known_hosts_line({"w0"}, "ssh-ed25519", bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().fields.at(0).field == "key");
  }
  // The blob is checked as a whole: a run of SSH strings, their count fixed by
  // the type, an ed25519 key of 32 bytes.
  auto ssh_string = [](std::string_view v) {
    const auto n = static_cast<uint32_t>(v.size());
    return std::string{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                       static_cast<char>(n)} +
           std::string(v);
  };
  const std::string ed = ssh_string("ssh-ed25519") + ssh_string(std::string(32, '\x01'));
  CHECK(known_hosts_line({"w0"}, "ssh-ed25519", kiln::base64_encode(ed)));
  for (const std::string& blob : {ssh_string("ssh-ed25519") + ssh_string(std::string(31, '\x01')),
                                  ed + ssh_string("extra"), ed + "x", ed.substr(0, ed.size() - 1),
                                  ssh_string("ssh-ed25519")}) {
    Result<std::string> r = known_hosts_line({"w0"}, "ssh-ed25519", kiln::base64_encode(blob));
    REQUIRE_FALSE(r);
    CHECK(r.error().fields.at(0).field == "key");
  }
  // Canonical base64 only: the same bytes with stray bits in the last
  // character before the padding decode leniently, but are refused.
  const std::string sk = ssh_string("sk-ssh-ed25519@openssh.com") + ssh_string(std::string(32, '\x02')) + ssh_string("ssh:");
  const std::string sk_key = kiln::base64_encode(sk);
  REQUIRE(sk_key.back() == '=');
  CHECK(known_hosts_line({"w0"}, "sk-ssh-ed25519@openssh.com", sk_key));
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string stray = sk_key;
  const std::size_t last = stray.find('=') - 1;
  stray[last] = alphabet[alphabet.find(stray[last]) + 1];  // sets a bit the padding leaves unused
  REQUIRE(kiln::base64_decode(stray));
  Result<std::string> refused = known_hosts_line({"w0"}, "sk-ssh-ed25519@openssh.com", stray);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().fields.at(0).message.find("not canonical") != std::string::npos);
  // A valid ed25519 blob named as another type.
  Result<std::string> wrong = known_hosts_line({"w0"}, "ssh-rsa", kEd25519);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().fields.at(0).message.find("does not hold a ssh-rsa key") != std::string::npos);
  CHECK(HostKey::types().size() == 7);
}
