#pragma once
// What a hypervisor host has, read from libvirt's XML documents (pure
// functions over text, parsed with libxml2; unit-tested on captured XML):
//
//   virConnectGetCapabilities  -> arch, NUMA cells (CPUs, memory, 2 MiB
//                                 hugepages), and for the host's arch the
//                                 guest domain types (kvm/qemu), emulator
//                                 and machine types
//   virNodeDeviceGetXMLDesc    -> a PCI device: NVIDIA (vendor 0x10de) display
//                                 controllers become HostGpus with their
//                                 IOMMU group, NUMA node and mdev types

#include <optional>
#include <string>

#include "common/result.h"
#include "drivers/host_facts.h"

namespace kiln::libvirt {

// kDriverError when the document is not capabilities XML.
Result<HostCapacity> parse_capabilities(const std::string& xml);

// The GPU a node device document describes, or nullopt when it is not a PCI
// device of vendor 0x10de with a display class (0x03xxxx). NVIDIA audio and
// USB functions of the same card are not GPUs.
std::optional<HostGpu> parse_gpu_nodedev(const std::string& xml);

}  // namespace kiln::libvirt
