#pragma once
// Checks that run the vendors' own tools when they are installed on the node
// and record what the existing parsers (agent/validate/parsers) extract:
//
//   nvidia_smi_topo   `nvidia-smi topo -m`          topo parser; GPU count and
//                                                   NVLink pairs vs the profile
//   dcgm_diag         `dcgmi diag -r N -j`          DCGM's JSON (the text parser
//                                                   when dcgmi printed a table/error)
//   nccl_tests        `all_reduce_perf -b 8M -e 1G -f 2 -g <gpus>`
//                                                   nccl-tests parser; bus bandwidth
//                                                   at the largest size vs the floor
//   ib_write_bw       `ib_write_bw --use_cuda` loopback between two local RDMA
//                                                   devices (or one with itself);
//                                                   perftest parser; proves a GPU
//                                                   buffer registers with the NIC
//
// A tool that is not installed gives `skip` ("<tool> not installed"); so does a
// profile that expects no GPU. A tool that runs and reports a problem, exits
// non-zero without output, or times out gives `fail` with its words.

#include <chrono>
#include <string>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/profile.h"
#include "agent/validate/checks/sysfs.h"

namespace kiln::agent {

struct ToolOptions {
  std::string search_path;                          // where tools are looked up (PATH syntax)
  std::chrono::seconds timeout{std::chrono::minutes(15)};
  HostPaths paths;                                  // for the RDMA device list
};

CheckResult check_nvidia_smi_topo(const ValidationProfile& profile, const ToolOptions& opts);
// `level` is dcgmi's run level: 1 (seconds), 2 (about 2 minutes), 3 (about 30 minutes).
CheckResult check_dcgm_diag(const ValidationProfile& profile, const ToolOptions& opts, int level);
CheckResult check_nccl_tests(const ValidationProfile& profile, const ToolOptions& opts);
CheckResult check_ib_write_bw(const ValidationProfile& profile, const ToolOptions& opts);

// DCGM's `-j` JSON reduced to {"tests": [{"name","status"}], "failed": [names],
// "warned": [names]}: every "status"/"result" string under a test "name" is
// read, whichever DCGM version's nesting holds it.
nlohmann::json summarize_dcgm_json(const nlohmann::json& j);

}  // namespace kiln::agent
