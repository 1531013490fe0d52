#pragma once
// What kilnd tells dnsmasq: the generated configuration file and the
// per-MAC files of its dhcp-hostsdir. Pure functions; no I/O.
//
// The configuration turns dnsmasq into a DHCP + TFTP server for one
// provisioning interface (DNS off) that chain-loads iPXE:
//
//   PXE ROM (no iPXE user class) --DHCP--> undionly.kpxe (BIOS) or ipxe.efi
//   (UEFI: client-arch 7 or 9) over TFTP from --ipxe-dir;
//   iPXE --DHCP--> <boot-url>/boot/boot.ipxe, a generic script that chains
//   <boot-url>/boot/${netX/mac}.ipxe (dnsmasq cannot put the MAC in a file
//   name; iPXE expands its own settings in a script).
//
// Only MACs with a file in the hostsdir are answered (dnsmasq sets the
// "known" tag when a dhcp-host entry matches), unless discovery is on.
// Option 224 (site-specific, always sent) carries the boot URL for OSes that
// did not boot through iPXE.

#include <string>
#include <string_view>

namespace kiln::boot {

struct DnsmasqConfigInput {
  std::string interface;    // --pxe-interface
  std::string range_start;  // --pxe-range START
  std::string range_end;    // --pxe-range END
  std::string boot_url;     // without a trailing '/'
  bool discovery = false;   // answer unknown MACs too
  std::string ipxe_dir;     // TFTP root
  std::string state_dir;    // DATA_DIR/dnsmasq: hosts/, leases, log, pid
  // The account dnsmasq keeps running as after start-up (it drops root to
  // its compiled-in "dnsmasq" user otherwise, which cannot read the data dir).
  std::string user;
  std::string group;
  std::string lease_time = "1h";
};

// The whole dnsmasq.conf text.
std::string render_dnsmasq_config(const DnsmasqConfigInput& in);

// The hostsdir file for one MAC (lowercase, colon-separated): its name and
// its content (one dhcp-host line without the "dhcp-host=" prefix).
std::string hosts_file_name(std::string_view mac);
// A port with pxe=false (a virtual node's NIC) is known for DHCP (an address
// and option 224) but tagged nopxe: it gets no boot file.
std::string hosts_file_content(std::string_view mac, bool pxe = true);

}  // namespace kiln::boot
