#pragma once
// DHCP leases from dnsmasq's lease file, for binding the boot chain to the
// address DHCP gave a MAC (docs/agent-protocol.md, "Trust"): a boot script or
// NoCloud seed is served only to the address leased to the MAC it is for.
//
// dnsmasq writes one IPv4 lease per line (dhcp-leasefile=):
//
//   <expiry> <mac> <ip> <hostname> <client-id>
//
// expiry is seconds since the epoch (0 = infinite lease), mac is colon hex
// (6 octets for Ethernet; other hardware types have another length or a
// "<type>-" prefix), hostname and client-id are "*" when absent. With DHCPv6
// it also writes a "duid <hex>" line and IPv6 leases after it; kilnd's
// configuration hands out no IPv6 leases (router advertisements only).
//
// The file is written by dnsmasq, which a hostile client can steer only
// through the hostname and client-id it sends; the parser still treats the
// text as untrusted (it is fuzzed): bounded size and line count, every field
// checked, nothing kept of a line but the MAC, the address and the expiry.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace kiln::boot {

struct DhcpLease {
  int64_t expiry = 0;  // seconds since the epoch; 0 = never expires
  std::string mac;     // lowercase, colon-separated, 6 octets
  std::string ip;      // dotted quad, as dnsmasq wrote it (validated)
};

// Limits of parse_dnsmasq_leases: a /16 range fits with room to spare.
constexpr std::size_t kMaxLeaseFileBytes = 8 * 1024 * 1024;
constexpr std::size_t kMaxLeaseLineBytes = 1024;

// Parses a whole lease file. Lines for hardware other than 6-octet Ethernet,
// the "duid" line and IPv6 leases (after "duid") are skipped: they cannot
// bind an Ethernet MAC to an IPv4 address. An empty text is no leases.
// Errors: kInvalidArgument "line N: <why>" for a malformed line (wrong field
// count, bad expiry, MAC or address, a line over kMaxLeaseLineBytes, a NUL)
// and for a text over kMaxLeaseFileBytes. A caller must then bind nothing
// (fail closed): a half-written file is retried on the next request.
Result<std::vector<DhcpLease>> parse_dnsmasq_leases(std::string_view text);

// The address leased to `mac` (normalized as DhcpLease::mac) among `leases`
// that have not expired at `now_s`; the newest expiry wins when dnsmasq lists
// a MAC twice. nullopt when there is none.
std::optional<std::string> leased_address(const std::vector<DhcpLease>& leases, std::string_view mac, int64_t now_s);

// Reads dnsmasq's lease file at each call (boot scripts and seeds are rare
// requests; the file is small and dnsmasq rewrites it in place).
// Thread-safe: holds nothing but the path. Blocking file I/O: call it from the
// BlockingPool, not an I/O thread.
class LeaseFile {
 public:
  explicit LeaseFile(std::string path) : path_(std::move(path)) {}
  // The current, unexpired address of `mac`: nullopt when it has none, and
  // also when the file is missing (no lease was ever given). Errors:
  // kInvalidArgument from the parser, kInternal when the file cannot be read.
  Result<std::optional<std::string>> address_of(std::string_view mac, int64_t now_s) const;
  // Every lease in the file (expired ones too: LeaseIndex needs them); none
  // when the file is missing. Errors as address_of.
  Result<std::vector<DhcpLease>> read() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kiln::boot
