// LeaseIndex::node_addresses: a node's DHCP addresses from one lease file
// (controller/boot/lease_addresses.h), the pure mapping kilnd records as
// address_source "dhcp".
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "controller/boot/dhcp_leases.h"
#include "controller/boot/lease_addresses.h"

using namespace kiln::boot;
using Strings = std::vector<std::string>;

namespace {

constexpr int64_t kNow = 1767225600;

LeaseIndex index_of(const std::string& text) {
  auto leases = parse_dnsmasq_leases(text);
  REQUIRE(leases);
  return LeaseIndex(std::move(*leases));
}

}  // namespace

TEST_CASE("lease addresses: a current lease of one of the node's MACs is its address, another node's is not") {
  LeaseIndex idx = index_of(
      "1767229200 52:54:00:00:00:01 10.77.0.150 node-a *\n"
      "1767229200 52:54:00:00:00:02 10.77.0.151 node-b *\n"
      "0 52:54:00:00:00:03 10.77.0.152 * *\n");  // 0: never expires
  CHECK(idx.node_addresses({"52:54:00:00:00:01"}, {}, kNow) == Strings{"10.77.0.150"});
  // A port MAC in upper case is the same MAC.
  CHECK(idx.node_addresses({"52:54:00:00:00:0A", "52:54:00:00:00:02"}, {}, kNow) == Strings{"10.77.0.151"});
  // Two NICs, two leases: both, sorted.
  CHECK(idx.node_addresses({"52:54:00:00:00:03", "52:54:00:00:00:01"}, {}, kNow) ==
        Strings{"10.77.0.150", "10.77.0.152"});
  // No port, or a MAC nobody leased: nothing.
  CHECK(idx.node_addresses({}, {}, kNow).empty());
  CHECK(idx.node_addresses({"52:54:00:00:00:09"}, {}, kNow).empty());
}

TEST_CASE("lease addresses: an expired lease gives nothing and takes a recorded address away") {
  LeaseIndex idx = index_of("1767225600 52:54:00:00:00:01 10.77.0.150 * *\n");  // expires at kNow
  CHECK(idx.node_addresses({"52:54:00:00:00:01"}, {}, kNow - 1) == Strings{"10.77.0.150"});
  CHECK(idx.node_addresses({"52:54:00:00:00:01"}, {}, kNow).empty());
  // Recorded while current, now expired: the file says it is not this node's now.
  CHECK(idx.node_addresses({"52:54:00:00:00:01"}, {"10.77.0.150"}, kNow).empty());
}

TEST_CASE("lease addresses: a recorded address the file knows nothing of stays, one now leased to another MAC goes") {
  LeaseIndex idx = index_of(
      "1767229200 52:54:00:00:00:01 10.77.0.150 * *\n"
      "1767229200 52:54:00:00:00:02 10.77.0.160 * *\n");
  // 10.88.0.5 came from another instance's dnsmasq (or a line dnsmasq
  // pruned): this file says nothing about it, so it stays, after the current one.
  CHECK(idx.node_addresses({"52:54:00:00:00:01"}, {"10.88.0.5"}, kNow) == Strings{"10.77.0.150", "10.88.0.5"});
  // 10.77.0.160 was this node's; dnsmasq has since given it to another MAC.
  CHECK(idx.node_addresses({"52:54:00:00:00:01"}, {"10.77.0.160"}, kNow) == Strings{"10.77.0.150"});
  // A recorded address that is not an IP, or is loopback, is dropped.
  CHECK(idx.node_addresses({"52:54:00:00:00:09"}, {"not-an-ip", "127.0.0.1", "10.88.0.5"}, kNow) ==
        Strings{"10.88.0.5"});
}

TEST_CASE("lease addresses: canonical, no loopback or link-local, bounded, newest line of a MAC twice counted once") {
  std::string text;
  for (int i = 0; i < 20; ++i) text += "0 52:54:00:00:01:" + std::to_string(10 + i) + " 10.1.0." + std::to_string(10 + i) + " * *\n";
  text += "0 52:54:00:00:02:01 127.0.0.1 * *\n";
  text += "0 52:54:00:00:02:02 169.254.3.4 * *\n";
  text += "0 52:54:00:00:02:03 10.2.0.1 * *\n";
  text += "0 52:54:00:00:02:03 10.2.0.1 * *\n";
  LeaseIndex idx = index_of(text);
  CHECK(idx.node_addresses({"52:54:00:00:02:01", "52:54:00:00:02:02"}, {}, kNow).empty());
  CHECK(idx.node_addresses({"52:54:00:00:02:03"}, {}, kNow) == Strings{"10.2.0.1"});
  Strings all;
  for (int i = 0; i < 20; ++i) all.push_back("52:54:00:00:01:" + std::to_string(10 + i));
  Strings got = idx.node_addresses(all, {"10.9.9.9"}, kNow);
  REQUIRE(got.size() == kMaxLeasedAddresses);
  // The current leases fill the bound before anything kept.
  CHECK(std::find(got.begin(), got.end(), "10.9.9.9") == got.end());
}

TEST_CASE("lease addresses: a MAC leased twice (ramdisk, then the OS's client-id) is the address granted last") {
  // dnsmasq keys leases by client-id when one is sent: the deploy ramdisk's
  // DHCP client sent none, the OS's systemd-networkd sends a DUID, so the
  // one NIC holds two current leases and only the newer address answers.
  LeaseIndex idx = index_of(std::to_string(kNow + 3000) + " 52:54:00:77:00:01 10.77.0.130 * *\n" +
                            std::to_string(kNow + 3500) + " 52:54:00:77:00:01 10.77.0.132 kiln-vm-1 ff:00:00:00:01\n" +
                            std::to_string(kNow + 3600) + " 52:54:00:77:00:02 10.77.0.140 * *\n");
  CHECK(idx.node_addresses({"52:54:00:77:00:01"}, {}, kNow) == Strings{"10.77.0.132"});
  // What an earlier sweep recorded from the older lease goes: the file has
  // that address on a line that is no longer this NIC's current address.
  CHECK(idx.node_addresses({"52:54:00:77:00:01"}, {"10.77.0.130", "10.77.0.132"}, kNow) == Strings{"10.77.0.132"});
  // Two NICs of one node: one address each.
  CHECK(idx.node_addresses({"52:54:00:77:00:01", "52:54:00:77:00:02"}, {}, kNow) ==
        Strings{"10.77.0.132", "10.77.0.140"});
  // Never-expiring beats any expiry; the older one expired leaves the newer.
  LeaseIndex forever = index_of("0 52:54:00:77:00:01 10.77.0.150 * *\n" + std::to_string(kNow + 9000) +
                                " 52:54:00:77:00:01 10.77.0.151 * *\n");
  CHECK(forever.node_addresses({"52:54:00:77:00:01"}, {}, kNow) == Strings{"10.77.0.150"});
}
