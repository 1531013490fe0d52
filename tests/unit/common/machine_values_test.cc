// Machine-reported values (common/machine_values.h): what an agent or a BMC
// says, fed hostile text. Each refusal is checked by its outcome, not its
// wording, except where the wording is the contract (no echo of the input).
#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "common/machine_values.h"

using kiln::check_printable;
using kiln::is_loopback_or_link_local;
using kiln::parse_hostname;
using kiln::parse_interface_name;
using kiln::parse_ip_address;
using kiln::printable_field;

namespace {

std::string ip(std::string_view s) {
  kiln::Result<std::string> r = parse_ip_address(s);
  return r ? *r : std::string("REFUSED");
}

}  // namespace

TEST_CASE("parse_ip_address: IPv4 dotted quads, strictly") {
  CHECK(ip("10.0.0.5") == "10.0.0.5");
  CHECK(ip("192.0.2.255") == "192.0.2.255");
  CHECK(ip("1.2.3.0") == "1.2.3.0");
  for (std::string_view bad : {"010.1.1.1", "10.01.1.1", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4.",
                               ".1.2.3.4", "1..2.3", "1.2.3.4 ", " 1.2.3.4", "0x7f.0.0.1", "2130706433",
                               "1.2.3.4/24", "1.2.3.-4", "1.2.3.1000", "0.0.0.0", "0.1.2.3",
                               "224.0.0.1", "239.1.1.1", "255.255.255.255", ""}) {
    INFO(bad);
    CHECK(ip(bad) == "REFUSED");
  }
}

TEST_CASE("parse_ip_address: IPv6 text forms come back in RFC 5952 form") {
  CHECK(ip("2001:DB8::1") == "2001:db8::1");
  CHECK(ip("2001:0db8:0000:0000:0000:0000:0000:0001") == "2001:db8::1");
  CHECK(ip("2001:db8:0:0:1:0:0:1") == "2001:db8::1:0:0:1");  // the first of two equal runs
  CHECK(ip("2001:db8:0:1:1:1:1:1") == "2001:db8:0:1:1:1:1:1");  // one zero group is not compressed
  CHECK(ip("64:ff9b::192.0.2.33") == "64:ff9b::c000:221");
  CHECK(ip("fe80::1") == "fe80::1");
  CHECK(ip("::1") == "::1");
  for (std::string_view bad : {"::", "::ffff:10.0.0.1", "::FFFF:1.2.3.4", "ff02::1", "1:2:3:4:5:6:7:8:9",
                               "2001:db8::1::2", "2001:db8:::1", "2001:db8::g", "[2001:db8::1]",
                               "2001:db8::1/64", "64:ff9b::010.0.0.1", "64:ff9b::1.2.3", "1.2.3.4::",
                               "12345::1", ":1::2", "2001:db8::1 "}) {
    INFO(bad);
    CHECK(ip(bad) == "REFUSED");
  }
}

TEST_CASE("parse_ip_address: a scope id is refused whatever it holds") {
  for (std::string_view bad :
       {"fe80::1%eth0", "fe80::1%eth0\nProxyCommand touch /tmp/pwn", "fe80::1%1", "2001:db8::1%", "fe80::1%25eth0",
        "fe80::1%eth0 ", "fe80::1%\"a\"", "fe80::1%#", "fe80::1%a=b", "fe80::1%\xc3\xa9", "10.0.0.1%eth0"}) {
    INFO(bad);
    kiln::Result<std::string> r = parse_ip_address(bad);
    REQUIRE_FALSE(r);
    // The message says why and never echoes the input.
    CHECK(r.error().message.find("ProxyCommand") == std::string::npos);
    CHECK(r.error().message.find('\n') == std::string::npos);
  }
  CHECK(parse_ip_address("fe80::1%eth0").error().message.find("scope id") != std::string::npos);
}

TEST_CASE("parse_ip_address: NUL, newlines, quotes, non-ASCII and a megabyte") {
  using namespace std::string_literals;
  for (const std::string& bad : {"10.0.0.1\0"s, "10.0.0\0.1"s, "10.0.0.1\n"s, "\"10.0.0.1\""s, "'::1'"s,
                                 "10.0.0.1#x"s, "a=10.0.0.1"s, "１.2.3.4"s, "2001:db8::\xff"s, "10.0.0.1 x"s}) {
    INFO(bad);
    CHECK(ip(bad) == "REFUSED");
  }
  std::string big(1 << 20, '1');
  kiln::Result<std::string> r = parse_ip_address(big);
  REQUIRE_FALSE(r);
  CHECK(r.error().message.size() < 100);
  CHECK(ip(std::string(1 << 20, ':')) == "REFUSED");
}

TEST_CASE("is_loopback_or_link_local: the one rule for addresses nobody logs in at") {
  for (std::string_view drop : {"127.0.0.1", "127.255.1.2", "169.254.3.4", "::1", "fe80::1", "FEBF::2", "fe80::",
                                "0:0:0:0:0:0:0:1", "fe9a:1::5"}) {
    INFO(drop);
    CHECK(is_loopback_or_link_local(drop));
  }
  for (std::string_view keep : {"10.0.0.5", "169.253.1.1", "126.0.0.1", "2001:db8::1", "fec0::1", "fe7f::1",
                                "fe8::1", "::2"}) {
    INFO(keep);
    CHECK_FALSE(is_loopback_or_link_local(keep));
  }
  CHECK_FALSE(is_loopback_or_link_local("fe80::1%eth0"));  // not an address at all
  CHECK_FALSE(is_loopback_or_link_local("not an address"));
}

TEST_CASE("parse_hostname: RFC 1123 names, lower-cased") {
  CHECK(*parse_hostname("Node-01.Lab.Example") == "node-01.lab.example");
  CHECK(*parse_hostname("3com.example.") == "3com.example");
  CHECK(*parse_hostname("a") == "a");
  std::string label63(63, 'a');
  CHECK(parse_hostname(label63 + ".example"));
  CHECK_FALSE(parse_hostname(label63 + "a.example"));
  std::string total253 = label63 + "." + label63 + "." + label63 + "." + std::string(61, 'b');
  REQUIRE(total253.size() == 253);
  CHECK(parse_hostname(total253));
  CHECK_FALSE(parse_hostname(total253 + "b"));
  using namespace std::string_literals;
  for (const std::string& bad :
       {""s, "."s, ".."s, "a..b"s, ".a"s, "-a"s, "a-"s, "a.-b"s, "a-.b"s, "a_b"s, "a b"s, "a\nProxyCommand x"s,
        "a%b"s, "a\"b"s, "a#b"s, "a=b"s, "h\xc3\xa9.example"s, "a\0b"s, "a/b"s, "a:22"s, std::string(1 << 20, 'a')}) {
    INFO(bad);
    CHECK_FALSE(parse_hostname(bad));
  }
}

TEST_CASE("parse_interface_name: IFNAMSIZ and a strict charset") {
  for (std::string_view good : {"eth0", "enp65s0f1np1", "bond0.100", "ib0", "br-lab", "veth_1", "abcdefghijklmno"}) {
    INFO(good);
    CHECK(parse_interface_name(good));
  }
  using namespace std::string_literals;
  for (const std::string& bad : {""s, "."s, ".."s, "abcdefghijklmnop"s, "eth0\n"s, "eth 0"s, "eth0:1"s, "a/b"s,
                                 "eth%0"s, "eth0\""s, "eth#"s, "a=b"s, "éth0"s, "eth\0"s, std::string(1 << 20, 'e')}) {
    INFO(bad);
    CHECK_FALSE(parse_interface_name(bad));
  }
}

TEST_CASE("check_printable: refuses control characters, bad UTF-8, deceptive text, oversize") {
  CHECK(check_printable("kiln-agent 0.4.1 (ramdisk)", 64));
  CHECK(check_printable("Grüße, 日本語", 64));
  CHECK(check_printable("", 64));
  CHECK(check_printable(std::string(64, 'x'), 64));
  CHECK_FALSE(check_printable(std::string(65, 'x'), 64));
  using namespace std::string_literals;
  for (const std::string& bad : {"a\nb"s, "a\rb"s, "a\tb"s, "a\0b"s, "a\x1b[31mb"s, "a\x7f"s, "a\xc2\x85"s /* NEL */,
                                 "a\xe2\x80\xa8"s /* U+2028 */, "a\xe2\x80\xae"s /* RLO */, "a\xe2\x81\xa6"s,
                                 "\xff"s, "\xc3"s, "\xc0\xaf"s /* overlong '/' */, "\xed\xa0\x80"s /* surrogate */,
                                 "\xf4\x90\x80\x80"s /* > U+10FFFF */, "\xe2\x82"s}) {
    INFO(bad);
    CHECK_FALSE(check_printable(bad, 64));
  }
  CHECK_FALSE(check_printable(std::string(1 << 20, 'a'), 256));
}

TEST_CASE("printable_field: BMC text is cleaned, never refused, and bounded") {
  using namespace std::string_literals;
  CHECK(printable_field("  PowerEdge R760  ", 64) == "PowerEdge R760");
  CHECK(printable_field("SN123\nProxyCommand touch /tmp/pwn", 64) == "SN123 ProxyCommand touch /tmp/pwn");
  CHECK(printable_field("A\r\n\tB", 64) == "A B");
  CHECK(printable_field("A\x1b[2JB", 64) == "A[2JB");
  CHECK(printable_field("A\0B"s, 64) == "AB");
  CHECK(printable_field("A\xff" "B\xc3", 64) == "AB");
  CHECK(printable_field("A\xe2\x80\xae" "B", 64) == "AB");
  CHECK(printable_field("Grüße", 64) == "Grüße");
  CHECK(printable_field("\n\n", 64).empty());
  // Cut at a character boundary: "ü" is two bytes and does not fit in 3.
  CHECK(printable_field("abü", 3) == "ab");
  CHECK(printable_field(std::string(1 << 20, 'x'), 255).size() == 255);
  // A cut never leaves a trailing space (found by the fuzzer).
  CHECK(printable_field("abc  x", 4) == "abc");
  CHECK(printable_field("abc\n\nxy", 4) == "abc");
  CHECK(printable_field("abc x", 5) == "abc x");
  // Whatever goes in, what comes out passes check_printable.
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  std::string out = printable_field(all, 1024);
  CHECK(check_printable(out, 1024));
  CHECK(out.find('\n') == std::string::npos);
}
