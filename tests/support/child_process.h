#pragma once
// ChildProcess: a program a test starts and owns. fork/exec with no shell,
// stdout and stderr appended to `log_path`; the destructor sends SIGTERM,
// then SIGKILL after a grace period, and reaps it, so a failing test never
// leaks a process. For daemons that announce nothing on stdout (kiln-agent);
// KilndProcess and VbmcProcess read their listen lines themselves.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace kiln::testing {

class ChildProcess {
 public:
  // argv[0] is a path. Throws std::runtime_error when fork fails; an exec
  // failure shows as exit code 127.
  ChildProcess(std::vector<std::string> argv, std::string log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Whether it is still running (reaps it when it has exited).
  bool running();
  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit code, or
  // 128+signal when a signal ended it. Idempotent.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Waits up to `timeout` for it to exit by itself: the exit code (as stop()),
  // or -1 when it is still running.
  int wait_exit(std::chrono::milliseconds timeout);
  std::string log() const;  // what it printed so far
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::string log_path_;
};

}  // namespace kiln::testing
