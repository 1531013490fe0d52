#pragma once
// pcie_links: did every NVIDIA GPU and every NIC train its PCIe link at full
// width and speed? Reads current_link_{speed,width} and max_link_{speed,width}
// from <sys>/bus/pci/devices/*.
//
// A narrower link than the device supports always fails. A slower link fails
// for NICs; for GPUs it is a warning unless the profile sets
// pcie.strict_gpu_speed, because an idle GPU drops its link to 2.5 GT/s to save
// power (kiln-gpucheck's pcie_bandwidth measures the link under load).
// Devices that do not report link attributes (virtio NICs) are listed as
// "no link info" and not judged.
//
//   status  fail  a degraded link; or GPUs expected and none on the bus
//           skip  no GPU and no NIC with link information
//   value   degraded links (failing ones); threshold {"max": 0}

#include <string>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/profile.h"

namespace kiln::agent {

CheckResult check_pcie_links(const ValidationProfile& profile, const std::string& sys_root);

}  // namespace kiln::agent
