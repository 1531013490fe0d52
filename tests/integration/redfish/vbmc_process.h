#pragma once
// VbmcProcess: runs kiln-vbmc as a child process for a test and stops it
// (SIGTERM, then SIGKILL) when destroyed. The constructor waits for the
// "redfish listening on https://HOST:PORT" line and throws
// std::runtime_error when it does not come within 20 s or the process exits.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::testing {

class VbmcProcess {
 public:
  explicit VbmcProcess(std::vector<std::string> args);
  ~VbmcProcess();
  VbmcProcess(const VbmcProcess&) = delete;
  VbmcProcess& operator=(const VbmcProcess&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

}  // namespace kiln::testing
