#pragma once
// gpudirect_rdma: can the NICs read and write GPU memory directly? Checks that
// the kernel can pin GPU memory for an RDMA device (the nvidia_peermem module
// is loaded, or the NVIDIA open kernel module is in use, which exports GPU
// memory as dma-buf) and that the RDMA ports are ACTIVE at the expected rate
// (<sys>/class/infiniband/*/ports/*/{state,rate,link_layer}).
//
// Registering a GPU buffer with the NIC is proven by `ib_write_bw --use_cuda`
// in the full plan (see tool_checks.h), not here.
//
//   status  skip  the profile expects no RDMA port
//           fail  fewer ACTIVE ports at the expected rate than expected, or
//                 no GPU memory registration path while GPUs are expected
//   value   ports ACTIVE at >= the expected rate; threshold {"min": ports}

#include "agent/validate/checks/check_result.h"
#include "agent/validate/checks/profile.h"
#include "agent/validate/checks/sysfs.h"

namespace kiln::agent {

CheckResult check_gpudirect_rdma(const ValidationProfile& profile, const HostPaths& paths);

}  // namespace kiln::agent
