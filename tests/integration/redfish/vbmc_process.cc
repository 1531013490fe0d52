#include "tests/integration/redfish/vbmc_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace kiln::testing {

VbmcProcess::VbmcProcess(std::vector<std::string> args) {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe");
  const char* bin_override = std::getenv("KILN_VBMC_BIN_OVERRIDE");  // e.g. an ASan build
  args.insert(args.begin(), bin_override ? bin_override : KILN_VBMC_BIN);
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork");
  if (pid_ == 0) {
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
  std::string seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  const std::string marker = "redfish listening on https://";
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n <= 0) break;
    seen.append(buf, static_cast<std::size_t>(n));
    const auto at = seen.find(marker);
    const auto nl = at == std::string::npos ? std::string::npos : seen.find('\n', at);
    if (nl != std::string::npos) {
      const std::string hostport = seen.substr(at + marker.size(), nl - at - marker.size());
      port_ = static_cast<uint16_t>(std::stoi(hostport.substr(hostport.rfind(':') + 1)));
      break;
    }
  }
  ::close(out[0]);
  if (port_ == 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw std::runtime_error("kiln-vbmc did not start; output: " + seen);
  }
}

VbmcProcess::~VbmcProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

}  // namespace kiln::testing
