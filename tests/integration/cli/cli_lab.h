#pragma once
// CliLab: a real kilnd with fake-driver nodes in the pool, a public image, a
// tenant with a quota and its token, and a way to run the real `kiln`
// binary against it (a subprocess, with KILN_URL/KILN_TOKEN set and no config
// file), capturing stdout, stderr and the exit code. Test code only.

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kilnd_process.h"
#include "tests/support/http_test_client.h"

namespace kiln::testing {

struct KilnRun {
  int status = -1;
  std::string out;
  std::string err;
};

struct CliLabOptions {
  int nodes = 3;
  int quota = 4;
  int step_delay_ms = 0;  // per fake-driver step, set once the nodes are available
};

class CliLab {
 public:
  explicit CliLab(CliLabOptions options = {});

  static constexpr const char* kAdminToken = "kiln_cli_test_admin_token_0001";
  static constexpr const char* kKey =
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 ci@example";

  std::string url() const { return "http://127.0.0.1:" + std::to_string(kilnd.port()); }
  // Runs `kiln <args>` (a shell fragment: quote what needs it) with the
  // tenant's token unless `token` says otherwise, against `url` (default ours).
  KilnRun kiln(const std::string& args, const std::string& token = "", const std::string& url = "") const;
  // The shell command that run() uses, for tests that background it.
  std::string kiln_command(const std::string& args, const std::string& token = "", const std::string& url = "") const;

  // Admin API calls; REQUIRE the status.
  nlohmann::json call(const std::string& method, const std::string& target, const nlohmann::json& body,
                      int expect);
  nlohmann::json get(const std::string& target) { return call("GET", target, nlohmann::json(), 200); }
  // Waits until every node is `state` (REQUIREs it within `limit_s`).
  void wait_nodes(const std::string& state, int limit_s = 30);
  // Writes a file in the lab's directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const;

  TempDir dir;
  KilndProcess kilnd;
  std::unique_ptr<HttpTestClient> admin;
  std::string tenant_token;
  std::vector<std::string> nodes;  // names a0..aN-1
};

}  // namespace kiln::testing
