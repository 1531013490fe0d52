#pragma once
// The libvirt domain XML kilnd defines for a virtual node: a pure function
// of a DomainSpec (no I/O), unit-tested for each flavour option.
//
//   <domain type='kvm|qemu'>        kvm only when the host really offers it and
//                                   the host is not forced to TCG (choose_domain_type)
//   <os> machine type; UEFI via OVMF (loader readonly pflash + per-domain NVRAM
//        from a template) or BIOS; boots from the disk
//   <features><acpi/><apic/>
//   <cputune><vcpupin> + <numatune> memory strict on one cell when pinned
//   <memoryBacking><hugepages/> when asked
//   <sysinfo type='smbios'> system serial "ds=nocloud-net;s=URL" (cloud-init NoCloud)
//   virtio disk (qcow2 volume), virtio NIC on a network or a bridge with a fixed MAC,
//   <hostdev mode='subsystem' type='pci' managed='yes'> per GPU, or an mdev,
//   serial console to a log file (and a pty), VNC off.

#include <string>
#include <vector>

#include "drivers/host_facts.h"

namespace kiln::libvirt {

struct DomainSpec {
  std::string name;
  std::string uuid;                 // optional; libvirt makes one when empty
  std::string domain_type = "qemu"; // kvm | qemu | test
  std::string arch = "x86_64";
  std::string machine = "q35";      // empty: the host's default
  std::string emulator;             // optional
  bool uefi = true;
  std::string ovmf_code;            // UEFI loader (read-only pflash)
  std::string ovmf_vars;            // the NVRAM template
  std::string nvram;                // this domain's NVRAM file
  int vcpus = 1;
  int64_t memory_mib = 1024;
  bool hugepages = false;
  std::vector<int> pinned_cpus;     // vCPU i runs on pinned_cpus[i]
  int numa_cell = -1;               // memory bound to this cell when >= 0
  std::vector<std::string> gpus;    // PCI addresses "0000:3b:00.0" (passthrough)
  std::vector<std::string> mdevs;   // mdev UUIDs (vGPU), instead of passthrough
  std::string disk_path;
  std::string disk_format = "qcow2";
  std::string mac;
  std::string network = "default";  // used when bridge is empty
  std::string bridge;
  std::string console_log;          // serial console log file on the host
  std::string smbios_serial;        // e.g. "ds=nocloud-net;s=http://10.77.0.1:8080/v1/nocloud/<id>/"
};

// The XML for `spec`; every value is escaped.
std::string domain_xml(const DomainSpec& spec);

// kvm when the host's capabilities offer it for the guest arch and TCG is
// not forced; otherwise qemu when offered; otherwise the first type offered
// (the test driver's "test"); "qemu" when nothing is known.
std::string choose_domain_type(const HostCapacity& caps, bool force_tcg);

// "0000:3b:00.0" -> domain/bus/slot/function attributes; false when malformed.
bool parse_pci_address(const std::string& address, unsigned* domain, unsigned* bus, unsigned* slot,
                       unsigned* function);

// XML text escaping (& < > ' ").
std::string xml_escape(const std::string& s);

// A locally administered MAC in QEMU's 52:54:00 range, derived from `seed`
// (the node id), so the same node always gets the same MAC.
std::string mac_for(const std::string& seed);

// The volume XML for a guest disk: qcow2 of `capacity_gib` backed by
// `backing_path` (format `backing_format`: raw or qcow2); no backing when empty.
std::string volume_xml(const std::string& name, int64_t capacity_gib, const std::string& backing_path,
                       const std::string& backing_format);

// A directory storage pool named `name` at `path`.
std::string dir_pool_xml(const std::string& name, const std::string& path);

}  // namespace kiln::libvirt
