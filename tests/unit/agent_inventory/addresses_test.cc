// The addresses the OS-phase agent reports (agent/inventory/addresses.h):
// the filter on made-up interfaces, and getifaddrs on this machine checked
// against ip(8) as an independent observer.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "agent/inventory/addresses.h"
#include "tests/support/ip_addresses.h"
#include "tests/support/skip.h"

using kiln::agent::InterfaceAddress;
using kiln::agent::reachable_addresses;

namespace {

InterfaceAddress up(const std::string& ifname, const std::string& address, bool loopback = false) {
  InterfaceAddress a;
  a.interface = ifname;
  a.address = address;
  a.loopback = loopback;
  a.up = true;
  return a;
}

}  // namespace

TEST_CASE("reachable addresses: no loopback, link-local or down interfaces, IPv4 first, no duplicates") {
  InterfaceAddress down = up("eth2", "198.51.100.9");
  down.up = false;
  std::vector<InterfaceAddress> all = {
      up("lo", "127.0.0.1", true), up("lo", "::1", true),       up("eth0", "fe80::1"),
      up("eth0", "2001:db8::5"),   up("eth0", "192.0.2.5"),     up("eth1", "169.254.3.4"),
      up("eth1", "FEBF::2"),       up("eth1", "10.0.0.7"),      up("br0", "192.0.2.5"),
      down,                        up("eth3", "fec0::1"),
  };
  CHECK(reachable_addresses(all) == std::vector<std::string>{"192.0.2.5", "10.0.0.7", "2001:db8::5", "fec0::1"});
  CHECK(reachable_addresses({up("lo", "127.0.0.1", true)}).empty());
  CHECK(reachable_addresses({}).empty());
}

TEST_CASE("reachable addresses of this machine: what ip(8) lists as global on up interfaces") {
  std::optional<std::vector<std::string>> ip = kiln::test::ip_global_addresses();
  if (!ip) {
    KILN_SKIP("skipping: ip(8) is not available to compare with");
  }
  const std::set<std::string> want(ip->begin(), ip->end());
  std::vector<std::string> got = reachable_addresses(kiln::agent::read_interface_addresses());
  CHECK(std::set<std::string>(got.begin(), got.end()) == want);
}
