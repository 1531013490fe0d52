#pragma once
// gpu_inventory: are the GPUs the profile promises present and what they
// should be? Compares NVML's view (count, model name, memory, driver and CUDA
// versions) with the profile, and cross-checks the count against the NVIDIA
// display-class devices on the PCI bus: a GPU that fell off the bus is still
// enumerated by PCI but not usable through the driver.
//
//   status  pass  every expectation met
//           fail  count/model/memory/version mismatch, or no GPU found while
//                 some are expected ("expected 8 GPUs, found 0: ...")
//           skip  the profile expects no GPU and none is usable
//   value   GPUs found through NVML; threshold {"expected": profile count}

#include <string>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/nvml.h"
#include "agent/validate/checks/profile.h"

namespace kiln::agent {

// `nvml` is read_nvml()'s answer (an error when there is no driver);
// `sys_root` is where sysfs is mounted. Pure apart from reading sysfs.
CheckResult check_gpu_inventory(const ValidationProfile& profile, const Result<NvmlSnapshot>& nvml,
                                const std::string& sys_root);

}  // namespace kiln::agent
