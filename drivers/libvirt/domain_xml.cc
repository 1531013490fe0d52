#include "drivers/libvirt/domain_xml.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include <openssl/sha.h>

namespace kiln::libvirt {

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&apos;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

bool parse_pci_address(const std::string& a, unsigned* domain, unsigned* bus, unsigned* slot, unsigned* function) {
  unsigned d = 0, b = 0, s = 0, f = 0;
  int used = 0;
  if (std::sscanf(a.c_str(), "%x:%x:%x.%x%n", &d, &b, &s, &f, &used) != 4 || used != static_cast<int>(a.size()))
    return false;
  if (b > 0xff || s > 0x1f || f > 7) return false;
  *domain = d;
  *bus = b;
  *slot = s;
  *function = f;
  return true;
}

std::string choose_domain_type(const HostCapacity& caps, bool force_tcg) {
  const auto& t = caps.domain_types;
  auto has = [&](const char* x) { return std::find(t.begin(), t.end(), x) != t.end(); };
  if (!force_tcg && has("kvm")) return "kvm";
  if (has("qemu")) return "qemu";
  if (!t.empty()) {
    for (const std::string& x : t)
      if (x != "kvm") return x;
  }
  return "qemu";
}

std::string mac_for(const std::string& seed) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(seed.data()), seed.size(), digest);
  char buf[18];
  std::snprintf(buf, sizeof buf, "52:54:00:%02x:%02x:%02x", digest[0], digest[1], digest[2]);
  return buf;
}

std::string domain_xml(const DomainSpec& s) {
  auto e = xml_escape;
  std::string x;
  x += "<domain type='" + e(s.domain_type) + "'>\n";
  x += "  <name>" + e(s.name) + "</name>\n";
  if (!s.uuid.empty()) x += "  <uuid>" + e(s.uuid) + "</uuid>\n";
  x += "  <metadata><kiln:node xmlns:kiln='https://kiln.dev/xmlns/node/1'>" + e(s.name) + "</kiln:node></metadata>\n";
  x += "  <memory unit='MiB'>" + std::to_string(s.memory_mib) + "</memory>\n";
  x += "  <currentMemory unit='MiB'>" + std::to_string(s.memory_mib) + "</currentMemory>\n";
  if (s.hugepages) x += "  <memoryBacking>\n    <hugepages/>\n  </memoryBacking>\n";
  x += "  <vcpu placement='static'>" + std::to_string(s.vcpus) + "</vcpu>\n";
  if (!s.pinned_cpus.empty()) {
    x += "  <cputune>\n";
    for (std::size_t i = 0; i < s.pinned_cpus.size() && static_cast<int>(i) < s.vcpus; ++i)
      x += "    <vcpupin vcpu='" + std::to_string(i) + "' cpuset='" + std::to_string(s.pinned_cpus[i]) + "'/>\n";
    x += "  </cputune>\n";
  }
  if (s.numa_cell >= 0) {
    x += "  <numatune>\n    <memory mode='strict' nodeset='" + std::to_string(s.numa_cell) + "'/>\n  </numatune>\n";
  }
  if (!s.smbios_serial.empty()) {
    x += "  <sysinfo type='smbios'>\n    <system>\n";
    x += "      <entry name='manufacturer'>Kiln</entry>\n";
    x += "      <entry name='product'>Kiln virtual node</entry>\n";
    x += "      <entry name='serial'>" + e(s.smbios_serial) + "</entry>\n";
    x += "    </system>\n  </sysinfo>\n";
  }
  x += "  <os>\n";
  x += "    <type arch='" + e(s.arch) + "'" + (s.machine.empty() ? "" : " machine='" + e(s.machine) + "'") + ">hvm</type>\n";
  if (s.uefi) {
    x += "    <loader readonly='yes' secure='no' type='pflash'>" + e(s.ovmf_code) + "</loader>\n";
    x += "    <nvram" + (s.ovmf_vars.empty() ? std::string() : " template='" + e(s.ovmf_vars) + "'") + ">" +
         e(s.nvram) + "</nvram>\n";
  }
  x += "    <boot dev='hd'/>\n";
  if (!s.smbios_serial.empty()) x += "    <smbios mode='sysinfo'/>\n";
  x += "  </os>\n";
  x += "  <features>\n    <acpi/>\n    <apic/>\n  </features>\n";
  if (s.domain_type == "kvm") {
    x += "  <cpu mode='host-passthrough' check='none'>\n";
    x += "    <topology sockets='1' dies='1' cores='" + std::to_string(s.vcpus) + "' threads='1'/>\n";
    x += "  </cpu>\n";
  }
  x += "  <clock offset='utc'/>\n";
  x += "  <on_poweroff>destroy</on_poweroff>\n  <on_reboot>restart</on_reboot>\n  <on_crash>destroy</on_crash>\n";
  x += "  <devices>\n";
  if (!s.emulator.empty()) x += "    <emulator>" + e(s.emulator) + "</emulator>\n";
  x += "    <disk type='file' device='disk'>\n";
  x += "      <driver name='qemu' type='" + e(s.disk_format) + "' cache='none' discard='unmap'/>\n";
  x += "      <source file='" + e(s.disk_path) + "'/>\n";
  x += "      <target dev='vda' bus='virtio'/>\n";
  x += "    </disk>\n";
  if (!s.bridge.empty()) {
    x += "    <interface type='bridge'>\n";
    x += "      <source bridge='" + e(s.bridge) + "'/>\n";
  } else {
    x += "    <interface type='network'>\n";
    x += "      <source network='" + e(s.network) + "'/>\n";
  }
  if (!s.mac.empty()) x += "      <mac address='" + e(s.mac) + "'/>\n";
  x += "      <model type='virtio'/>\n";
  x += "    </interface>\n";
  for (const std::string& g : s.gpus) {
    unsigned d = 0, b = 0, sl = 0, f = 0;
    if (!parse_pci_address(g, &d, &b, &sl, &f)) continue;  // placement only books discovered addresses
    char addr[128];
    std::snprintf(addr, sizeof addr, "<address domain='0x%04x' bus='0x%02x' slot='0x%02x' function='0x%x'/>", d, b,
                  sl, f);
    x += "    <hostdev mode='subsystem' type='pci' managed='yes'>\n";
    x += "      <source>\n        " + std::string(addr) + "\n      </source>\n";
    x += "    </hostdev>\n";
  }
  for (const std::string& m : s.mdevs) {
    x += "    <hostdev mode='subsystem' type='mdev' model='vfio-pci'>\n";
    x += "      <source>\n        <address uuid='" + e(m) + "'/>\n      </source>\n";
    x += "    </hostdev>\n";
  }
  x += "    <serial type='pty'>\n";
  if (!s.console_log.empty()) x += "      <log file='" + e(s.console_log) + "' append='on'/>\n";
  x += "      <target port='0'/>\n";
  x += "    </serial>\n";
  x += "    <console type='pty'>\n      <target type='serial' port='0'/>\n    </console>\n";
  x += "    <rng model='virtio'>\n      <backend model='random'>/dev/urandom</backend>\n    </rng>\n";
  x += "    <memballoon model='none'/>\n";
  x += "  </devices>\n";
  x += "</domain>\n";
  return x;
}

std::string volume_xml(const std::string& name, int64_t capacity_gib, const std::string& backing_path,
                       const std::string& backing_format) {
  std::string x = "<volume>\n  <name>" + xml_escape(name) + "</name>\n";
  x += "  <capacity unit='GiB'>" + std::to_string(capacity_gib) + "</capacity>\n";
  x += "  <target>\n    <format type='qcow2'/>\n  </target>\n";
  if (!backing_path.empty()) {
    x += "  <backingStore>\n    <path>" + xml_escape(backing_path) + "</path>\n";
    x += "    <format type='" + xml_escape(backing_format.empty() ? "raw" : backing_format) + "'/>\n";
    x += "  </backingStore>\n";
  }
  x += "</volume>\n";
  return x;
}

std::string dir_pool_xml(const std::string& name, const std::string& path) {
  return "<pool type='dir'>\n  <name>" + xml_escape(name) + "</name>\n  <target>\n    <path>" + xml_escape(path) +
         "</path>\n  </target>\n</pool>\n";
}

}  // namespace kiln::libvirt
