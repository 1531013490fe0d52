#pragma once
// VbmcChild: kiln-vbmc as a child process for a test or a bench, the one
// launcher of it. The constructor waits (up to `timeout`, 60 s by default)
// until its output has shown a line starting with each of `wait_for`
// ("ipmi listening on ", "redfish listening on https://", "fleet ready: ")
// and throws std::runtime_error, quoting the output, when the process exits
// or the time runs out. The destructor stops it (SIGTERM, then SIGKILL) and
// removes its log. Output goes to a file, so the child never blocks on a
// full pipe.
//
// The binary is KILN_VBMC_BIN_OVERRIDE (e.g. an ASan build) when set, else
// the kiln-vbmc of this build.
//
// run_vbmc_to_exit() runs kiln-vbmc with `args` to completion (bad flags)
// and returns its exit code (-1 when it had to be killed after 10 s).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/logged_child.h"

namespace kiln::testing {

std::string vbmc_binary();

class VbmcChild {
 public:
  VbmcChild(std::vector<std::string> args, std::vector<std::string> wait_for,
            std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~VbmcChild();
  VbmcChild(const VbmcChild&) = delete;
  VbmcChild& operator=(const VbmcChild&) = delete;

  // The rest of the first line that started with `prefix`.
  std::string line(const std::string& prefix) const;
  // The port at the end of that line ("...:PORT").
  uint16_t port_of(const std::string& prefix) const;
  pid_t pid() const { return child_->pid(); }

 private:
  std::string log_path_;
  std::unique_ptr<LoggedChild> child_;
  std::map<std::string, std::string> lines_;
};

int run_vbmc_to_exit(std::vector<std::string> args);

}  // namespace kiln::testing
