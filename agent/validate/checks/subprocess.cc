#include "agent/validate/checks/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

extern char** environ;

namespace kiln::agent {

namespace {

using Clock = std::chrono::steady_clock;

// Builds argv/envp for execve before fork, so the child only calls
// async-signal-safe functions.
struct ExecImage {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<char*> argv;
  std::vector<char*> envp;

  explicit ExecImage(const ProcessSpec& spec) : args(spec.argv) {
    for (char** e = environ; e && *e; ++e) {
      std::string kv(*e);
      bool overridden = false;
      for (const auto& [k, v] : spec.env) overridden |= kv.compare(0, k.size() + 1, k + "=") == 0;
      if (!overridden) env.push_back(std::move(kv));
    }
    for (const auto& [k, v] : spec.env) env.push_back(k + "=" + v);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

// In the child: own process group (so a timeout kills its children too),
// stdin from /dev/null, then exec; on failure report errno over `err_fd`.
[[noreturn]] void exec_child(const ExecImage& img, int out_fd, int err_fd, int status_fd) {
  setpgid(0, 0);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  dup2(out_fd, 1);
  dup2(err_fd, 2);
  execvpe(img.argv[0], img.argv.data(), img.envp.data());
  int e = errno;
  ssize_t w = write(status_fd, &e, sizeof e);
  (void)w;
  _exit(127);
}

ProcessOutput decode_status(int st) {
  ProcessOutput o;
  if (WIFEXITED(st)) o.exit_code = WEXITSTATUS(st);
  else if (WIFSIGNALED(st)) o.signal = WTERMSIG(st);
  return o;
}

// A CLOEXEC pipe that reports whether exec succeeded: EOF = exec'd,
// an int = errno of the failed exec.
Result<int> wait_exec(int status_read, const std::string& name) {
  int e = 0;
  ssize_t n;
  do n = read(status_read, &e, sizeof e); while (n < 0 && errno == EINTR);
  close(status_read);
  if (n == static_cast<ssize_t>(sizeof e))
    return Error(Code::kNotFound, "cannot run " + name + ": " + std::strerror(e));
  return 0;
}

}  // namespace

Result<ProcessOutput> run_process(const ProcessSpec& spec) {
  if (spec.argv.empty()) return Error(Code::kInvalidArgument, "no command");
  ExecImage img(spec);
  int out[2], err[2], status[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Error(Code::kInternal, std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]); close(out[1]);
    return Error(Code::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  if (pipe2(status, O_CLOEXEC) != 0) {
    close(out[0]); close(out[1]); close(err[0]); close(err[1]);
    return Error(Code::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], err[0], err[1], status[0], status[1]}) close(fd);
    return Error(Code::kInternal, std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) exec_child(img, out[1], err[1], status[1]);
  setpgid(pid, pid);  // also here, so the group exists before we might kill it
  close(out[1]);
  close(err[1]);
  close(status[1]);
  auto exec_ok = wait_exec(status[0], spec.argv[0]);
  if (!exec_ok) {
    close(out[0]);
    close(err[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return exec_ok.take_error();
  }

  ProcessOutput result;
  const auto deadline = Clock::now() + spec.timeout;
  bool timed_out = false;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        if (sinks[i]->size() < spec.max_output)
          sinks[i]->append(buf, std::min<std::size_t>(got, spec.max_output - sinks[i]->size()));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int st = 0;
  if (timed_out) {
    kill(-pid, SIGKILL);
    waitpid(pid, &st, 0);
    std::string tail = result.err.size() > 400 ? result.err.substr(result.err.size() - 400) : result.err;
    return Error(Code::kTimeout, spec.argv[0] + " ran past " + std::to_string(spec.timeout.count() / 1000) +
                                     " s and was killed" + (tail.empty() ? "" : "; stderr: " + tail));
  }
  // Pipes closed: the child is exiting (or closed its outputs). Reap it
  // within what is left of the deadline.
  while (true) {
    const pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (Clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &st, 0);
      return Error(Code::kTimeout, spec.argv[0] + " closed its output but did not exit before the deadline");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ProcessOutput status_only = decode_status(st);
  result.exit_code = status_only.exit_code;
  result.signal = status_only.signal;
  return result;
}

BackgroundProcess::~BackgroundProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(-pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }
  if (!log_path_.empty()) unlink(log_path_.c_str());
  if (!err_path_.empty()) unlink(err_path_.c_str());
}

namespace {

// A temporary file for a background child's output; -1 and `path` empty on failure.
int make_log_file(std::string& path) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-bg-XXXXXX").string();
  const int fd = mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd >= 0) path = tmpl;
  return fd;
}

std::string read_file(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

Result<std::unique_ptr<BackgroundProcess>> BackgroundProcess::start(const ProcessSpec& spec, BackgroundOutput output) {
  if (spec.argv.empty()) return Error(Code::kInvalidArgument, "no command");
  ExecImage img(spec);
  // The object owns the file names from here on, so every early return
  // below unlinks them through the destructor (pid_ is still -1).
  auto proc = std::make_unique<BackgroundProcess>();
  const int log_fd = make_log_file(proc->log_path_);
  if (log_fd < 0) return Error(Code::kInternal, std::string("mkostemp: ") + std::strerror(errno));
  int err_fd = log_fd;
  if (output == BackgroundOutput::kSeparate) {
    err_fd = make_log_file(proc->err_path_);
    if (err_fd < 0) {
      const int e = errno;
      close(log_fd);
      return Error(Code::kInternal, std::string("mkostemp: ") + std::strerror(e));
    }
  }
  auto close_logs = [&] {
    close(log_fd);
    if (err_fd != log_fd) close(err_fd);
  };
  int status[2];
  if (pipe2(status, O_CLOEXEC) != 0) {
    const int e = errno;
    close_logs();
    return Error(Code::kInternal, std::string("pipe: ") + std::strerror(e));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close_logs();
    close(status[0]); close(status[1]);
    return Error(Code::kInternal, std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) exec_child(img, log_fd, err_fd, status[1]);
  setpgid(pid, pid);
  close_logs();
  close(status[1]);
  if (auto ok = wait_exec(status[0], spec.argv[0]); !ok) {
    int st = 0;
    waitpid(pid, &st, 0);
    return ok.take_error();
  }
  proc->pid_ = pid;
  return proc;
}

std::string BackgroundProcess::output_so_far() const { return read_file(log_path_); }

bool BackgroundProcess::running() {
  if (pid_ <= 0 || reaped_) return false;
  int st = 0;
  pid_t w;
  do w = waitpid(pid_, &st, WNOHANG); while (w < 0 && errno == EINTR);
  if (w == pid_ || w < 0) {  // w < 0: not our child any more; treat as gone
    reaped_ = true;
    wait_status_ = st;
  }
  return !reaped_;
}

ProcessOutput BackgroundProcess::finish(std::chrono::milliseconds timeout) {
  ProcessOutput o;
  if (pid_ <= 0) return o;
  const auto deadline = Clock::now() + timeout;
  while (running() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!reaped_) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, &wait_status_, 0);
    reaped_ = true;
  }
  pid_ = -1;
  o = decode_status(wait_status_);
  o.out = read_file(log_path_);
  o.err = read_file(err_path_);
  return o;
}

std::optional<std::string> find_executable(const std::string& name, const std::string& search_path) {
  auto runnable = [](const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
  };
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) return runnable(name) ? std::optional<std::string>(name) : std::nullopt;
  std::size_t start = 0;
  while (start <= search_path.size()) {
    std::size_t end = search_path.find(':', start);
    if (end == std::string::npos) end = search_path.size();
    std::string dir = search_path.substr(start, end - start);
    if (!dir.empty()) {
      std::string p = dir + "/" + name;
      if (runnable(p)) return p;
    }
    start = end + 1;
  }
  return std::nullopt;
}

std::string self_exe_dir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return p.parent_path().string();
}

}  // namespace kiln::agent
