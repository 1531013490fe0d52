#pragma once
// NCCL's own account of what it chose (transports, network, GPUDirect),
// captured from NCCL_DEBUG=INFO into a temporary NCCL_DEBUG_FILE and parsed
// with agent/validate/parsers/nccl_debug.h. Shared by nccl_allreduce and
// nccl_multinode.
//
// NCCL reads its environment once, at the first call that initialises it
// (ncclGetUniqueId, ncclCommInit*; not ncclGetVersion), so construct this
// before that call.

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::gpucheck {

class NcclDebugLog {
 public:
  // Keeps a caller's NCCL_DEBUG=TRACE (or INFO), else sets INFO; sets
  // NCCL_DEBUG_SUBSYS=INIT,NET,ENV unless set; points NCCL_DEBUG_FILE at a
  // file in a fresh temporary directory.
  NcclDebugLog();
  // Removes the directory and the log.
  ~NcclDebugLog();
  NcclDebugLog(const NcclDebugLog&) = delete;
  NcclDebugLog& operator=(const NcclDebugLog&) = delete;

  // The parsed log. Errors (to record as a warning, never a failure):
  // "NCCL wrote no debug log; transports not recorded" or
  // "NCCL debug log not parsed: <why>".
  Result<nlohmann::json> parse() const;

 private:
  std::string dir_;
  std::string path_;
};

}  // namespace kiln::gpucheck
