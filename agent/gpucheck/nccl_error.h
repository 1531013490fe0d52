#pragma once
// The text of a failed NCCL call: "<call>: <NCCL's message> (<code>)", plus
// NCCL's last error detail when it has one. Shared by nccl_allreduce and
// nccl_multinode.

#include <nccl.h>

#include <string>

namespace kiln::gpucheck {

inline std::string nccl_error(const char* call, ncclResult_t rc) {
  std::string s = std::string(call) + ": " + ncclGetErrorString(rc) + " (" + std::to_string(static_cast<int>(rc)) + ")";
  if (const char* last = ncclGetLastError(nullptr); last && *last) s += ": " + std::string(last);
  return s;
}

}  // namespace kiln::gpucheck
