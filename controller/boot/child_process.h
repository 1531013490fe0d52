#pragma once
// ChildProcess: a program kilnd runs and supervises (dnsmasq, curl for image
// downloads). fork + exec with everything prepared before the fork, so the
// child runs only async-signal-safe calls in a multi-threaded kilnd.
//
// The child gets stdin from /dev/null, stdout and stderr appended to
// `output_file`, no inherited descriptors but those three (kilnd's sockets and
// database must not leak into it), and dies with kilnd (PR_SET_PDEATHSIG) so
// a kilnd killed with -9 leaves no dnsmasq holding the DHCP port.
//
// Not thread-safe: one owner drives it (the supervisor's coroutine).

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace kiln::boot {

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is the program path (no PATH search)
  std::string output_file;        // stdout + stderr, appended; /dev/null when empty
  // Signal sent to the child when the kilnd thread that spawned it exits.
  int parent_death_signal = 15;   // SIGTERM
};

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_) { o.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  // Kills (SIGKILL) and reaps a child still running: an owner that forgets to
  // stop it leaks nothing.
  ~ChildProcess();

  // Starts the program. Errors: kInvalidArgument (empty argv), kNotFound /
  // kPermissionDenied (exec failed: reported through a close-on-exec pipe, so
  // this is known before spawn returns), kInternal (fork/pipe/open failed).
  static Result<ChildProcess> spawn(const ChildSpec& spec);

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // Non-blocking: reaps the child when it has exited and returns its wait
  // status (then running() is false); nullopt while it runs.
  std::optional<int> poll();
  // Sends `sig`; false when there is no child.
  bool signal(int sig);
  // SIGTERM, then SIGKILL after `grace`; reaps; returns the wait status (or
  // nullopt when there was no child).
  std::optional<int> stop(std::chrono::milliseconds grace);

 private:
  pid_t pid_ = -1;
};

// "exit code 1", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

}  // namespace kiln::boot
