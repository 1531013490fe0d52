#pragma once
// The iPXE scripts kilnd serves at GET /boot/{mac}.ipxe
// (docs/agent-protocol.md): which one a node gets, and their text. Pure
// functions; the route (controller/api/boot_routes.cc) looks the node and
// the deploy ramdisk up and mints the one-time token.

#include <string>
#include <string_view>

#include "controller/model/node.h"

namespace kiln::boot {

// Who may fetch per-node boot data.
enum class LeaseBinding {
  kUnbound,    // nothing to bind to: refuse every per-node boot document (404)
  kLeaseFile,  // only the address DHCP leased to the node's MAC (BootSettings::lease_file)
  kOff,        // anyone: chosen explicitly by the operator (--lease-binding off), lab-only
};

// What the boot chain is configured with (kilnd flags).
struct BootSettings {
  // Base URL nodes reach kilnd's HTTP server at (no trailing '/'); empty =
  // derive it from each request's Host header.
  std::string boot_url;
  // The `ramdisk` image booted for agent work (--deploy-ramdisk).
  std::string deploy_ramdisk = "deploy-ramdisk";
  // How per-node boot data (per-MAC boot scripts, NoCloud seeds) is bound to
  // the machine asking for it (docs/agent-protocol.md, "Trust"). The default
  // fails closed: a kilnd with nothing to bind to serves none of it.
  LeaseBinding binding = LeaseBinding::kUnbound;
  // dnsmasq's lease file, with LeaseBinding::kLeaseFile: per-node boot data
  // is served only to the address leased to one of the node's MACs.
  std::string lease_file;
  // SHA-256 hex of kilnd's TLS leaf certificate (DER); "" when kilnd serves
  // plain HTTP. Goes on the ramdisk's command line as kiln.tls_sha256.
  std::string tls_sha256;
};

enum class BootKind {
  kRamdisk,    // boot the deploy ramdisk (the agent has work)
  kLocalDisk,  // boot what is on the disk
  kRetry,      // nothing to boot now: say why, wait, ask again
};

struct BootChoice {
  BootKind kind = BootKind::kRetry;
  std::string reason;  // for kRetry: logged by kilnd, never shown to the caller
};

// The contract's table: ramdisk for inspecting, cleaning, burning_in and
// deploying before set_boot_disk; local disk for deploying from
// set_boot_disk on, validating and active; retry otherwise.
BootChoice choose_boot(const Node& node);

// /boot/boot.ipxe: what dnsmasq hands iPXE; chains the per-MAC script.
std::string chain_script(std::string_view boot_url);

struct RamdiskBoot {
  std::string boot_url;
  std::string image;        // the ramdisk image's id (URL segment)
  std::string kernel_args;  // the image's kernel_args
  std::string node_id;
  std::string token;        // one-time boot token
  std::string mac;          // to chain back here when a download fails
  std::string tls_sha256;   // kiln.tls_sha256 when non-empty
};
std::string ramdisk_script(const RamdiskBoot& b);
// BIOS: sanboot the first disk; UEFI: exit to the firmware's next boot entry.
std::string local_disk_script(std::string_view boot_mode);
// Nothing to boot for this caller: the one answer for an unknown MAC, a
// known MAC with nothing to boot, a caller that does not hold the MAC's
// lease, and a deploy ramdisk that cannot be served. It names nothing (no
// node, no state, no reason: those go to kilnd's log), waits 10 s and chains
// /boot/<mac>.ipxe again, so the text depends only on the URL and the MAC
// asked for.
std::string nothing_to_boot_script(std::string_view boot_url, std::string_view mac);

}  // namespace kiln::boot
