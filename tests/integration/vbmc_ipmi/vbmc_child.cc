#include "tests/integration/vbmc_ipmi/vbmc_child.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>

namespace kiln::testing {

namespace {

const char* vbmc_binary() {
  const char* over = std::getenv("KILN_VBMC_BIN_OVERRIDE");  // e.g. an ASan build
  return over ? over : KILN_VBMC_BIN;
}

pid_t spawn(std::vector<std::string> args, int* out_fd) {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe");
  args.insert(args.begin(), vbmc_binary());
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork");
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  *out_fd = out[0];
  return pid;
}

void stop_child(pid_t pid) {
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
    ::usleep(50 * 1000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

VbmcChild::VbmcChild(std::vector<std::string> args, std::vector<std::string> wait_for) {
  pid_ = spawn(std::move(args), &out_fd_);
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::size_t found = 0;
  while (found < wait_for.size() && std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[512];
    const ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<std::size_t>(n));
    found = 0;
    std::size_t at = 0;
    for (std::size_t nl = seen.find('\n'); nl != std::string::npos; nl = seen.find('\n', at)) {
      const std::string l = seen.substr(at, nl - at);
      at = nl + 1;
      for (const auto& w : wait_for) {
        if (l.rfind(w, 0) == 0) lines_[w] = l.substr(w.size());
      }
    }
    for (const auto& w : wait_for) found += lines_.count(w);
  }
  if (found < wait_for.size()) {
    stop_child(pid_);
    ::close(out_fd_);
    pid_ = -1;
    throw std::runtime_error("kiln-vbmc did not start; output: " + seen);
  }
  // Keep reading so the child never blocks writing to a full pipe.
  const int fd = out_fd_;
  drain_ = std::thread([fd] {
    char buf[512];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
  });
}

VbmcChild::~VbmcChild() {
  if (pid_ > 0) stop_child(pid_);
  if (drain_.joinable()) drain_.join();  // the pipe reaches EOF once the child is gone
  if (out_fd_ >= 0) ::close(out_fd_);
}

std::string VbmcChild::line(const std::string& prefix) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lines_.find(prefix);
  return it == lines_.end() ? std::string() : it->second;
}

uint16_t VbmcChild::port_of(const std::string& prefix) const {
  const std::string l = line(prefix);
  const auto colon = l.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("no port in '" + l + "'");
  return static_cast<uint16_t>(std::stoi(l.substr(colon + 1)));
}

int run_to_exit(std::vector<std::string> args) {
  int fd = -1;
  const pid_t pid = spawn(std::move(args), &fd);
  ::close(fd);
  int status = 0;
  for (int i = 0; i < 200; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    ::usleep(50 * 1000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace kiln::testing
