#include "kilnd_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tests/support/http_test_client.h"

namespace kiln::testing {

namespace {
int wait_for_exit(pid_t pid, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}
}  // namespace

TempDir::TempDir() {
  char tmpl[] = "/tmp/kiln-it-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}
TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

KilndProcess::KilndProcess(std::string data_dir, std::vector<std::string> extra_flags)
    : data_dir_(std::move(data_dir)), flags_(std::move(extra_flags)) {
  log_file_ = data_dir_ + "/kilnd.log";
}

KilndProcess::~KilndProcess() {
  if (pid_ > 0) kill9();
}

bool KilndProcess::tls() const {
  for (const auto& f : flags_)
    if (f == "--tls-cert") return true;
  return false;
}

void KilndProcess::start(bool wait_ready, std::chrono::milliseconds timeout) {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> args = {KILND_BINARY, "--listen", "127.0.0.1:0", "--data-dir", data_dir_};
  args.insert(args.end(), flags_.begin(), flags_.end());
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(out[1], 1);
    int logfd = ::open(log_file_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (logfd >= 0) ::dup2(logfd, 2);
    ::close(out[0]);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(out[1]);
  pid_ = pid;
  // Read "listening on 127.0.0.1:PORT\n" with a deadline.
  std::string line;
  auto end = std::chrono::steady_clock::now() + timeout;
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  while (line.find('\n') == std::string::npos) {
    if (std::chrono::steady_clock::now() > end) {
      ::close(out[0]);
      throw std::runtime_error("kilnd did not print its listening line; log:\n" + log());
    }
    char buf[256];
    ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n > 0) {
      line.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      ::close(out[0]);
      int st = wait_for_exit(pid_, std::chrono::seconds(2));
      pid_ = -1;
      throw std::runtime_error("kilnd exited (" + std::to_string(st) + ") before listening; log:\n" + log());
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ::close(out[0]);
  auto colon = line.rfind(':');
  if (line.rfind("listening on ", 0) != 0 || colon == std::string::npos)
    throw std::runtime_error("unexpected first line from kilnd: " + line);
  port_ = static_cast<uint16_t>(std::stoi(line.substr(colon + 1)));
  if (!wait_ready) return;
  while (std::chrono::steady_clock::now() < end) {
    try {
      HttpTestClient c("127.0.0.1", port_, tls(), std::chrono::seconds(2));
      if (c.request("GET", "/readyz").status == 200) return;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("kilnd never became ready; log:\n" + log());
}

int KilndProcess::terminate(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int st = wait_for_exit(pid_, timeout);
  if (st < 0) {
    kill9();
    return -1;
  }
  pid_ = -1;
  return st;
}

void KilndProcess::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string KilndProcess::log() const {
  std::ifstream f(log_file_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int KilndProcess::run_to_exit(const std::vector<std::string>& args, std::string* out, std::string* err) {
  int o[2], e[2];
  if (::pipe(o) != 0 || ::pipe(e) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(o[1], 1);
    ::dup2(e[1], 2);
    ::close(o[0]);
    ::close(e[0]);
    std::vector<std::string> full = {KILND_BINARY};
    full.insert(full.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : full) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(o[1]);
  ::close(e[1]);
  auto slurp = [](int fd) {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return s;
  };
  *out = slurp(o[0]);
  *err = slurp(e[0]);
  int st = wait_for_exit(pid, std::chrono::seconds(20));
  if (st < 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  return st;
}

}  // namespace kiln::testing
