#pragma once
// The booted OS's IP addresses, as the OS-phase agent reports them in its
// heartbeats (docs/agent-protocol.md) so kilnd can show a tenant `addresses`
// and an `ssh` login.

#include <string>
#include <vector>

namespace kiln::agent {

struct InterfaceAddress {
  std::string interface;  // "ens3"
  std::string address;    // "10.0.0.5", "2001:db8::5" (no zone, no prefix length)
  bool loopback = false;  // the interface is a loopback (IFF_LOOPBACK)
  bool up = false;        // IFF_UP
};

// The addresses a tenant could log in at: those of interfaces that are up,
// minus loopback and link-local ones (kiln::is_loopback_or_link_local, the
// rule kilnd applies too) and any kilnd's parse_ip_address would refuse; in
// canonical text, IPv4 before IPv6, otherwise in the order given; no
// duplicates.
// Pure: tested with made-up interfaces.
std::vector<std::string> reachable_addresses(const std::vector<InterfaceAddress>& all);

// This machine's interface addresses (getifaddrs); empty when it fails.
std::vector<InterfaceAddress> read_interface_addresses();

}  // namespace kiln::agent
