#include "agent/gpucheck/nccl_debug_log.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "agent/validate/parsers/nccl_debug.h"

namespace kiln::gpucheck {

NcclDebugLog::NcclDebugLog() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-nccl-XXXXXX").string();
  if (mkdtemp(tmpl.data())) {
    dir_ = tmpl;
    path_ = dir_ + "/nccl-debug.log";
  }
  const char* level = getenv("NCCL_DEBUG");
  if (!level || (std::string(level) != "INFO" && std::string(level) != "TRACE")) setenv("NCCL_DEBUG", "INFO", 1);
  if (!getenv("NCCL_DEBUG_SUBSYS")) setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV", 1);
  if (!path_.empty()) setenv("NCCL_DEBUG_FILE", path_.c_str(), 1);
}

NcclDebugLog::~NcclDebugLog() {
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

Result<nlohmann::json> NcclDebugLog::parse() const {
  std::string log;
  if (!path_.empty()) {
    std::ifstream in(path_, std::ios::binary);
    log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (log.empty()) return Error(Code::kNotFound, "NCCL wrote no debug log; transports not recorded");
  auto parsed = agent::parse_nccl_debug(log);
  if (!parsed) return Error(Code::kInvalidArgument, "NCCL debug log not parsed: " + parsed.error().message);
  return parsed;
}

}  // namespace kiln::gpucheck
