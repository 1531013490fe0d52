#include "common/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <poll.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/fd_limit.h"

namespace kiln {
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
  int out_fd = spec.stdout_fd >= 0 ? ::fcntl(spec.stdout_fd, F_DUPFD_CLOEXEC, 3)
                                   : ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (out_fd < 0) return Error(Code::kInternal, "cannot open " + out + ": " + std::strerror(errno));
  int err_fd = -1;
  if (spec.stderr_fd >= 0) {
    err_fd = ::fcntl(spec.stderr_fd, F_DUPFD_CLOEXEC, 3);
  } else if (!spec.error_file.empty()) {
    err_fd = ::open(spec.error_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  } else {
    err_fd = ::fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
  }
  int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2] = {-1, -1};
  if (err_fd < 0 || null_fd < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(out_fd);
    if (err_fd >= 0) ::close(err_fd);
    if (null_fd >= 0) ::close(null_fd);
    return Error(Code::kInternal, std::string("cannot prepare a child: ") + std::strerror(e));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(out_fd);
    ::close(err_fd);
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
    ::dup2(err_fd, 2);
    // Only 0-2 and the report pipe (close-on-exec) survive into the program.
    const unsigned keep = static_cast<unsigned>(report[1]);
    if (keep >= 3) close_fds(3, keep - 1);
    close_fds(keep + 1, ~0u);
    restore_fd_limit_in_child();  // after close_fds: without close_range it walks to the limit
    ::execv(argv[0], argv.data());
    const int e = errno;
    ssize_t w = ::write(report[1], &e, sizeof e);
    (void)w;
    ::_exit(127);
  }
  ::close(out_fd);
  ::close(err_fd);
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

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto st = poll()) return st;
    if (pid_ <= 0 || std::chrono::steady_clock::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "wait status " + std::to_string(status);
}

int exit_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

namespace {

std::string read_from(const std::string& file, std::uintmax_t from) {
  std::ifstream f(file, std::ios::binary);
  if (!f) return "";
  f.seekg(static_cast<std::streamoff>(from));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Result<std::map<std::string, std::string>> wait_for_lines(ChildProcess& child, const std::string& file,
                                                          const std::vector<std::string>& prefixes,
                                                          std::chrono::milliseconds timeout, std::uintmax_t from) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  std::map<std::string, std::string> found;
  std::string seen;
  for (;;) {
    seen = read_from(file, from);
    size_t at = 0;
    for (size_t nl = seen.find('\n'); nl != std::string::npos; nl = seen.find('\n', at)) {
      const std::string line = seen.substr(at, nl - at);
      at = nl + 1;
      for (const std::string& p : prefixes)
        if (!found.count(p) && line.rfind(p, 0) == 0) found[p] = line.substr(p.size());
    }
    if (found.size() == prefixes.size()) return found;
    if (auto st = child.poll())
      return Error(Code::kUnavailable, "the program ended (" + describe_wait_status(*st) + ") before printing " +
                                           prefixes[found.size() < prefixes.size() ? found.size() : 0] +
                                           "; its output:\n" + seen);
    if (std::chrono::steady_clock::now() >= end)
      return Error(Code::kTimeout, "no line starting with the expected prefixes within " +
                                       std::to_string(timeout.count()) + " ms; output:\n" + seen);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Result<ProgramOutput> run_program(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  int o[2] = {-1, -1}, e[2] = {-1, -1};
  if (::pipe2(o, O_CLOEXEC) != 0 || ::pipe2(e, O_CLOEXEC) != 0) {
    for (int fd : {o[0], o[1], e[0], e[1]})
      if (fd >= 0) ::close(fd);
    return Error(Code::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  ChildSpec spec;
  spec.argv = argv;
  spec.stdout_fd = o[1];
  spec.stderr_fd = e[1];
  Result<ChildProcess> child = ChildProcess::spawn(spec);
  ::close(o[1]);
  ::close(e[1]);
  if (!child) {
    ::close(o[0]);
    ::close(e[0]);
    return child.take_error();
  }
  ProgramOutput result;
  const auto end = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{o[0], POLLIN, 0}, {e[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool late = false;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      late = true;
      break;
    }
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (const pollfd& p : fds)
    if (p.fd >= 0) ::close(p.fd);
  // Both pipes closed: it is exiting; a little slack past the deadline for that.
  std::optional<int> st = late ? std::nullopt : child->wait(std::chrono::seconds(2));
  if (!st) {
    child->stop(std::chrono::milliseconds(0));
    return Error(Code::kTimeout, argv[0] + " ran past " + std::to_string(timeout.count()) + " ms");
  }
  result.status = *st;
  return result;
}

}  // namespace kiln
