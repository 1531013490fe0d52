#pragma once
// The addresses a deployed node holds on the provisioning network, as this
// kilnd's DHCP server leased them: how a node whose OS runs no kiln-agent (a
// distro cloud image with cloud-init) still shows `addresses` and an `ssh`
// login (AgentBroker::learn_leased_addresses writes them, with
// address_source "dhcp").
//
// A lease file is one instance's view. With PXE on several kilnd
// (docs/scale-out.md) each dnsmasq leases from its own range, so a node's
// current lease is in one instance's file and the others know nothing of it.
// The rule is therefore "what this file says, and nothing about what it does
// not say":
//  - an address this file leases now (unexpired) to one of the node's MACs
//    is the node's; of several current leases of one MAC, only the one
//    granted last (the latest expiry; 0, never, counts as latest). One NIC
//    has one address, and a MAC leases twice when its DHCP client changes
//    the client-id it sends: the deploy ramdisk's client, then the OS's
//    systemd-networkd (a DUID), on one boot after the other. The older
//    lease stays current until it expires, and its address is dead;
//  - an address the node already shows from DHCP stays while this file says
//    nothing about it (another instance leased it, or dnsmasq pruned the
//    expired line: the OS keeps its address until it is undeployed, as an
//    agent-reported address does);
//  - it goes as soon as this file has that address on any line that is not
//    a current lease to one of the node's MACs: its lease expired, or the
//    address now belongs to another machine. A node never shows an address
//    its DHCP server says is someone else's.
// Every address is parse_ip_address's canonical text; loopback and
// link-local ones are dropped (is_loopback_or_link_local: nobody logs in at
// them from elsewhere); at most kMaxLeasedAddresses, current leases first.
//
// Pure: no I/O, no clock (the caller passes `now_s`). Thread-compatible.

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller/boot/dhcp_leases.h"

namespace kiln::boot {

// A node has a handful of NICs with one IPv4 lease each; more than this is a
// lease file kilnd should not believe.
inline constexpr std::size_t kMaxLeasedAddresses = 8;

// One lease file's leases, indexed by MAC and by address so a sweep over
// many nodes parses and indexes the file once.
class LeaseIndex {
 public:
  explicit LeaseIndex(std::vector<DhcpLease> leases);

  // The node's DHCP addresses by the rule above: `macs` are its ports' MACs
  // (any case; normalized here), `recorded` the DHCP addresses it shows now.
  // Sorted and unique within each group (current leases, then kept ones).
  std::vector<std::string> node_addresses(const std::vector<std::string>& macs,
                                          const std::vector<std::string>& recorded, int64_t now_s) const;

  std::size_t size() const { return leases_.size(); }

 private:
  std::vector<DhcpLease> leases_;
  std::unordered_multimap<std::string, std::size_t> by_mac_;  // index into leases_
  std::unordered_multimap<std::string, std::size_t> by_ip_;   // canonical address
};

}  // namespace kiln::boot
