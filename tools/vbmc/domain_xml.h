#pragma once
// Reading and rewriting the few parts of a libvirt domain XML the virtual BMC
// needs. libvirt hands back normalised XML (one element per line, attributes
// in single quotes), so a small scanner is enough; no XML library.

#include <string>
#include <vector>

#include "tools/vbmc/backend.h"

namespace kiln::vbmc {

struct DomainXmlInfo {
  int vcpus = 0;
  int64_t memory_kib = 0;
  std::vector<MachineDisk> disks;      // device='disk' only
  std::vector<std::string> macs;       // lowercase
  std::vector<std::string> boot_devs;  // <os><boot dev=.../> in order: hd, network, cdrom
  bool uefi = false;                   // <os firmware='efi'> or an OVMF/EFI <loader>
};

DomainXmlInfo parse_domain_xml(const std::string& xml);

// The XML with <os>'s boot entries replaced by `devs` (e.g. {"network", "hd"}).
// Unchanged when there is no <os> element.
std::string set_boot_devs(const std::string& xml, const std::vector<std::string>& devs);

}  // namespace kiln::vbmc
