#pragma once
// VbmcChild: kiln-vbmc as a child process for the IPMI tests. The
// constructor waits (up to 60 s) until stdout has shown a line starting with
// each of `wait_for` ("ipmi listening on ", "redfish listening on https://",
// "fleet ready: ") and throws std::runtime_error when the process exits or
// the time runs out. The destructor stops it (SIGTERM, then SIGKILL).
// stdout keeps being drained by a thread so the child never blocks on it.
//
// run_to_exit() runs kiln-vbmc with `args` to completion (bad flags) and
// returns its exit status (-1 when it had to be killed after 10 s).

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::testing {

class VbmcChild {
 public:
  VbmcChild(std::vector<std::string> args, std::vector<std::string> wait_for);
  ~VbmcChild();
  VbmcChild(const VbmcChild&) = delete;
  VbmcChild& operator=(const VbmcChild&) = delete;

  // The rest of the first line that started with `prefix`.
  std::string line(const std::string& prefix) const;
  // The port at the end of that line ("...:PORT").
  uint16_t port_of(const std::string& prefix) const;

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::thread drain_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> lines_;
};

int run_to_exit(std::vector<std::string> args);

}  // namespace kiln::testing
