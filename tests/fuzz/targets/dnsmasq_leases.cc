// dnsmasq's lease file (controller/boot/dhcp_leases.h): whatever a DHCP
// client could steer into it. Every lease kept has a 6-octet lowercase MAC
// and a dotted-quad address.
#include <cstdint>
#include <string_view>

#include "controller/boot/dhcp_leases.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Result<std::vector<kiln::boot::DhcpLease>> leases = kiln::boot::parse_dnsmasq_leases(text);
  if (!leases) return 0;
  for (const kiln::boot::DhcpLease& l : *leases) {
    if (l.mac.size() != 17) __builtin_trap();
    for (char c : l.mac)
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == ':')) __builtin_trap();
    (void)kiln::boot::leased_address(*leases, l.mac, 1);
  }
  return 0;
}
