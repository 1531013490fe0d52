#pragma once
// KilndProcess: runs the real kilnd binary for a test.
//
// start() runs kilnd (common/child_process.h) with --listen 127.0.0.1:0 and
// the given flags, waits for "listening on HOST:PORT" on its stdout (a file in
// the data dir), and waits for /readyz. stderr (the log) goes to a file the
// test can read. The binary is KILN_KILND_BIN_OVERRIDE when set (a bench
// driving a Release kilnd), else the KILND_BINARY this build compiled into
// kiln_kilnd_launcher.
// The destructor kills whatever is still running (SIGKILL), so a failing
// test never leaks a process.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/child_process.h"
#include "tests/support/http_test_client.h"

namespace kiln::testing {

class KilndProcess {
 public:
  // `data_dir` persists across restarts of the same test. Unless the flags
  // configure lease binding themselves (--lease-binding, --dhcp-leases,
  // --pxe-interface), kilnd binds boot data to DATA_DIR/dhcp.leases, a lease
  // file that starts empty: see lease_to_loopback.
  explicit KilndProcess(std::string data_dir, std::vector<std::string> extra_flags = {});
  ~KilndProcess();

  // Starts kilnd; throws std::runtime_error with the log tail when it does
  // not listen within `timeout`. When `wait_ready`, also waits for /readyz 200.
  void start(bool wait_ready = true, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  // SIGTERM and wait; returns the exit status (or -1 on timeout, then SIGKILL).
  int terminate(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // SIGKILL and reap: a crash as far as kilnd can tell.
  void kill9();
  bool running() const { return child_.running(); }
  // The process id while it runs (for /proc/<pid>/stat), -1 otherwise.
  pid_t pid() const { return child_.pid(); }

  // Appends a lease of `mac` to 127.0.0.1 (where the test's HTTP clients
  // connect from) to the default lease file, as dnsmasq would record one:
  // from then on that MAC's boot script and its node's seed are served to the
  // test. kilnd reads the file at each request, so this works while it runs.
  void lease_to_loopback(const std::string& mac) const;

  uint16_t port() const { return port_; }
  bool tls() const;
  const std::string& log_file() const { return log_file_; }
  std::string log() const;  // the whole log so far
  const std::string& data_dir() const { return data_dir_; }

  // Runs kilnd with exactly `args` (no --listen added), waits, returns the
  // exit code and fills *out / *err. For flag validation tests.
  static int run_to_exit(const std::vector<std::string>& args, std::string* out, std::string* err);

 private:
  std::string data_dir_;
  std::vector<std::string> flags_;
  std::string log_file_;
  ChildProcess child_;
  uint16_t port_ = 0;
};

// The kilnd binary started: $KILN_KILND_BIN_OVERRIDE, else KILND_BINARY.
std::string kilnd_binary();

// A fresh directory under /tmp, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Every node a kilnd lists, following `next` page by page (limit=1000), as
// the caller with `headers` sees them. Throws std::runtime_error naming the
// page and the reply when one is not a 200.
nlohmann::json all_nodes(HttpTestClient& c, const Headers& headers);

}  // namespace kiln::testing
