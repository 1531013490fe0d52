#pragma once
// gpu_health: is any GPU reporting a fault? Per GPU through NVML: volatile
// uncorrected ECC errors, row-remapping pending or failed, retired pages
// pending, and clock throttling for a fault or limit (HW slowdown, thermal,
// power brake); plus the XID events in the kernel log since boot.
//
//   status  fail  any of the above, or GPUs expected but NVML unusable
//           skip  the profile expects no GPU
//           pass  otherwise (aggregate ECC counts and idle/power-cap clock
//                 reasons are recorded as warnings, not failures)
//   value   number of problems found; threshold {"max": 0}
// XIDs whose code is in the profile's gpu.xid_ignore list are recorded but
// not held against the node. An unreadable kernel log is a warning.

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/nvml.h"
#include "agent/validate/checks/profile.h"
#include "common/result.h"

namespace kiln::agent {

// `kernel_log` is read_kernel_log()'s answer. Pure.
CheckResult check_gpu_health(const ValidationProfile& profile, const Result<NvmlSnapshot>& nvml,
                             const Result<std::string>& kernel_log);

}  // namespace kiln::agent
