#pragma once
// ChildProcess: the one way Kiln starts another program, in kilnd (dnsmasq,
// curl for image downloads), in tests (kilnd, kiln-vbmc, kiln-agent) and in
// the benches. fork + exec with everything prepared before the fork, so the
// child runs only async-signal-safe calls in a multi-threaded parent.
//
// The child gets stdin from /dev/null, stdout and stderr appended to files
// (or to descriptors the caller passes), no inherited descriptors but those
// three (kilnd's sockets and database must not leak into it), its own process
// group, and dies with the thread that spawned it (PR_SET_PDEATHSIG) so a
// parent killed with -9 leaves no dnsmasq holding the DHCP port.
//
// Not thread-safe: one owner drives it. The helpers below block (tests,
// benches, kilnd's blocking pool); kilnd's supervisor polls instead.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace kiln {

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is the program path (no PATH search)
  std::string output_file;        // stdout (+ stderr), appended; /dev/null when empty
  std::string error_file;         // stderr apart, appended ("" = with stdout)
  // Descriptors to use instead of the files (pipes a caller reads); -1 = the
  // file. The child gets its own copy; the caller closes these after spawn.
  int stdout_fd = -1;
  int stderr_fd = -1;
  // Signal sent to the child when the thread that spawned it exits (0: none;
  // a test that starts kilnd from a helper thread must not lose it with the thread).
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
  // Blocks up to `timeout` for the child to exit by itself: its wait status,
  // or nullopt while it still runs.
  std::optional<int> wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
};

// "exit code 1", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

// The shell's view of a wait status: the exit code, or 128 + the signal.
int exit_code(int wait_status);

// Blocks until `file` (the child's output) holds, after byte `from`, a line
// starting with each of `prefixes`; returns the rest of the first such line
// for each. kTimeout after `timeout`, kUnavailable when the child exits
// first; both messages quote what the file held.
Result<std::map<std::string, std::string>> wait_for_lines(ChildProcess& child, const std::string& file,
                                                          const std::vector<std::string>& prefixes,
                                                          std::chrono::milliseconds timeout,
                                                          std::uintmax_t from = 0);

// Runs a program to completion with its stdout and stderr captured (read
// through pipes while it runs). kTimeout (and the child killed) when it runs
// past `timeout`; spawn's errors otherwise.
struct ProgramOutput {
  int status = 0;  // wait status
  std::string out;
  std::string err;
};
Result<ProgramOutput> run_program(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

}  // namespace kiln
