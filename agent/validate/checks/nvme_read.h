#pragma once
// nvme_read: sequential read throughput of local NVMe, bypassing the page
// cache (O_DIRECT, 4 MiB reads into a 4 KiB-aligned buffer) for up to
// profile.nvme.read_mib MiB from the start of the device (or a file).
//
// The target is, in order: `path_override`, profile.nvme.path, or /dev/<name>
// for the first whole NVMe namespace under <sys>/block. The number of NVMe
// namespaces found there is compared with profile.nvme.devices.
//
//   status  skip  no NVMe and the profile expects none; or the filesystem
//                 refused O_DIRECT (tmpfs): a buffered read is then measured
//                 and reported with "direct": false, but a page-cache figure
//                 cannot prove the device, so it is not a pass
//           fail  fewer NVMe namespaces than expected, the target cannot be
//                 opened or read, or GB/s below thresholds.nvme_gbps_min
//   value   GB/s (10^9 bytes/s); threshold {"min": nvme_gbps_min}

#include <string>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/profile.h"

namespace kiln::agent {

// Blocking disk I/O: run it off any I/O thread.
CheckResult check_nvme_read(const ValidationProfile& profile, const std::string& sys_root,
                            const std::string& path_override = "");

}  // namespace kiln::agent
