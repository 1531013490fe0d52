#include "controller/boot/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace kiln::boot {
namespace {

// Closes descriptors lo..hi (in the child, before exec).
void close_fds(unsigned lo, unsigned hi) {
  if (lo > hi) return;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, lo, hi, 0u) == 0) return;
#endif
  struct rlimit rl {};
  unsigned max = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) max = static_cast<unsigned>(rl.rlim_cur);
  for (unsigned fd = lo; fd <= hi && fd < max; ++fd) ::close(static_cast<int>(fd));
}

}  // namespace

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    pid_ = o.pid_;
    o.pid_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

Result<ChildProcess> ChildProcess::spawn(const ChildSpec& spec) {
  if (spec.argv.empty()) return Error(Code::kInvalidArgument, "no program to run");
  // Everything the child needs is built here, before fork.
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string out = spec.output_file.empty() ? "/dev/null" : spec.output_file;
  int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (out_fd < 0) return Error(Code::kInternal, "cannot open " + out + ": " + std::strerror(errno));
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2];
  if (null_fd < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out_fd);
    if (null_fd >= 0) ::close(null_fd);
    return Error(Code::kInternal, std::string("cannot prepare a child: ") + std::strerror(e));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(out_fd);
    ::close(null_fd);
    ::close(report[0]);
    ::close(report[1]);
    return Error(Code::kInternal, std::string("fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    if (spec.parent_death_signal != 0) {
      ::prctl(PR_SET_PDEATHSIG, spec.parent_death_signal);
      if (::getppid() != parent) ::_exit(127);  // the parent is already gone
    }
    ::setpgid(0, 0);  // its own group: a terminal's ^C reaches kilnd, which stops it cleanly
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);  // kilnd ignores it; the program expects the default
    ::dup2(null_fd, 0);
    ::dup2(out_fd, 1);
    ::dup2(out_fd, 2);
    // Only 0-2 and the report pipe (close-on-exec) survive into the program.
    const unsigned keep = static_cast<unsigned>(report[1]);
    if (keep >= 3) close_fds(3, keep - 1);
    close_fds(keep + 1, ~0u);
    ::execv(argv[0], argv.data());
    const int e = errno;
    ssize_t w = ::write(report[1], &e, sizeof e);
    (void)w;
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(null_fd);
  ::close(report[1]);
  int exec_errno = 0;
  ssize_t n = 0;
  do {
    n = ::read(report[0], &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    ::waitpid(pid, nullptr, 0);
    const std::string msg = spec.argv[0] + ": " + std::strerror(exec_errno);
    if (exec_errno == ENOENT || exec_errno == ENOTDIR) return Error(Code::kNotFound, msg);
    if (exec_errno == EACCES || exec_errno == EPERM) return Error(Code::kPermissionDenied, msg);
    return Error(Code::kInternal, msg);
  }
  ChildProcess child;
  child.pid_ = pid;
  return child;
}

std::optional<int> ChildProcess::poll() {
  if (pid_ <= 0) return std::nullopt;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return status;
  }
  if (r < 0 && errno == ECHILD) {  // reaped by someone else
    pid_ = -1;
    return 0;
  }
  return std::nullopt;
}

bool ChildProcess::signal(int sig) { return pid_ > 0 && ::kill(pid_, sig) == 0; }

std::optional<int> ChildProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return std::nullopt;
  ::kill(pid_, SIGTERM);
  auto end = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < end) {
    if (auto st = poll()) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "wait status " + std::to_string(status);
}

}  // namespace kiln::boot
