#pragma once
// LoggedChild: a program a test starts and owns (kiln-agent, kiln-vbmc),
// through the one fork/exec helper (common/child_process.h). stdout and
// stderr are appended to `log_path`; the destructor sends SIGTERM, then
// SIGKILL after a grace period, and reaps it, so a failing test never leaks
// a process; it also dies with the test (SIGKILL on parent death).
// Throws std::runtime_error when it cannot start (the message says why).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/child_process.h"

namespace kiln::testing {

class LoggedChild {
 public:
  // argv[0] is a path.
  LoggedChild(std::vector<std::string> argv, std::string log_path);
  ~LoggedChild();
  LoggedChild(const LoggedChild&) = delete;
  LoggedChild& operator=(const LoggedChild&) = delete;

  // Whether it is still running (reaps it when it has exited).
  bool running();
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit code, or
  // 128+signal when a signal ended it. Idempotent.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Waits up to `timeout` for it to exit by itself: the exit code (as stop()),
  // or -1 when it is still running.
  int wait_exit(std::chrono::milliseconds timeout);
  // Waits until its output (since start) has a line starting with each of
  // `prefixes`; the rest of each line. Throws with the output otherwise.
  std::map<std::string, std::string> wait_for_lines(const std::vector<std::string>& prefixes,
                                                    std::chrono::milliseconds timeout);
  std::string log() const;  // what it printed so far
  pid_t pid() const { return child_.pid(); }

 private:
  ChildProcess child_;
  int status_ = -1;
  std::string log_path_;
  std::uintmax_t start_ = 0;  // the log's size before it started
};

}  // namespace kiln::testing
