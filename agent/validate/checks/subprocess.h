#pragma once
// Running the node's own tools (kiln-gpucheck, dcgmi, nvidia-smi, nccl-tests,
// perftest) with a deadline, capturing what they print. fork/exec with pipes,
// no shell: arguments are passed as they are. Blocking; call it off any I/O
// thread. A child still running at the deadline is killed (SIGKILL to the
// process group it was started in, which holds only that child and its own
// children).

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace kiln::agent {

struct ProcessOutput {
  int exit_code = -1;         // -1 when killed by a signal
  int signal = 0;             // the signal that ended it, 0 if it exited
  std::string out;            // stdout
  std::string err;            // stderr
};

struct ProcessSpec {
  std::vector<std::string> argv;                            // argv[0] is a path or a name on PATH
  std::vector<std::pair<std::string, std::string>> env;     // added to the agent's environment
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::size_t max_output = 64 * 1024 * 1024;                // per stream; the rest is dropped
};

// Runs the process to completion. Errors: kNotFound when it cannot be
// executed (exec failed: missing, not executable), kTimeout when it ran past
// `timeout` (it is killed; the message carries the tail of its stderr),
// kInternal when pipes or fork fail.
Result<ProcessOutput> run_process(const ProcessSpec& spec);

// A process started in the background (the server half of a perftest pair,
// the rank-0 kiln-gpucheck of a multi-node collective). The destructor kills
// and reaps it if it is still running. One thread uses an instance at a time.
enum class BackgroundOutput {
  kCombined,  // stdout and stderr in one file; finish() returns it all in `out`
  kSeparate,  // two files; finish() fills `out` and `err`
};

class BackgroundProcess {
 public:
  BackgroundProcess() = default;
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;
  ~BackgroundProcess();

  // Starts `spec.argv` with its output sent to temporary files (removed by
  // the destructor). kNotFound / kInternal as run_process.
  static Result<std::unique_ptr<BackgroundProcess>> start(const ProcessSpec& spec,
                                                          BackgroundOutput output = BackgroundOutput::kCombined);

  // What it has written to stdout so far (with kCombined, stderr too). Reads
  // the file each call: meant for small outputs such as a first line.
  std::string output_so_far() const;

  // False once it has exited (it is reaped then; finish() still returns its
  // status and output).
  bool running();

  // Waits up to `timeout` for it to exit, then kills it; returns what it printed.
  ProcessOutput finish(std::chrono::milliseconds timeout);

 private:
  int pid_ = -1;
  bool reaped_ = false;
  int wait_status_ = 0;  // from waitpid, once reaped_
  std::string log_path_;
  std::string err_path_;  // kSeparate only
};

// The executable `name` in the ':'-separated directories of `search_path`
// (a name containing '/' is checked as given). nullopt when not found.
std::optional<std::string> find_executable(const std::string& name, const std::string& search_path);

// The directory of the running executable (/proc/self/exe), "" if unknown.
std::string self_exe_dir();

}  // namespace kiln::agent
