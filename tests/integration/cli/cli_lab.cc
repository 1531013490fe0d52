#include "cli_lab.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/cli_run.h"
#include "tests/support/wait_until.h"

namespace kiln::testing {

using nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> kilnd_flags(const std::string& dir) {
  return {"--bootstrap-token", CliLab::kAdminToken, "--image-dir", dir + "/img", "--allocation-interval-ms", "100",
          "--power-sync-interval", "0"};
}

std::string make_image_dir(const std::string& dir) {
  std::filesystem::create_directories(dir + "/img");
  std::ofstream(dir + "/img/demo.img") << std::string(4096, '\0');
  return dir;
}

}  // namespace

CliLab::CliLab(CliLabOptions o)
    : kilnd(make_image_dir(dir.path()), kilnd_flags(dir.path())) {
  kilnd.start();
  admin = std::make_unique<HttpTestClient>("127.0.0.1", kilnd.port());
  call("POST", "/v1/images",
       {{"name", "demo-os"}, {"kind", "os"}, {"format", "raw"}, {"source", dir.path() + "/img/demo.img"},
        {"public", true}, {"size", 4096},
        {"sha256", "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7"}},
       201);
  call("POST", "/v1/tenants",
       {{"name", "acme"},
        {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"max_nodes", o.quota}}})}},
       201);
  tenant_token = call("POST", "/v1/tokens", {{"name", "ci"}, {"role", "tenant"}, {"tenant", "acme"}}, 201)["token"];
  for (int i = 0; i < o.nodes; ++i) {
    nodes.push_back("a" + std::to_string(i));
    call("POST", "/v1/nodes",
         {{"name", nodes.back()}, {"profile", "cpu-lab"}, {"bmc", {{"driver", "fake"}, {"address", "bmc-" + nodes.back()}}}},
         201);
    call("PUT", "/v1/nodes/" + nodes.back() + "/states/provision", {{"target", "manage"}}, 202);
  }
  wait_nodes("manageable");
  for (const std::string& n : nodes) call("PUT", "/v1/nodes/" + n + "/states/provision", {{"target", "provide"}}, 202);
  wait_nodes("available");
  if (o.step_delay_ms > 0) {
    for (const std::string& n : nodes) {
      auto r = admin->request("PATCH", "/v1/nodes/" + n,
                             json{{"bmc", {{"options", {{"step_delay_ms", o.step_delay_ms}}}}}}.dump(),
                             {{"Authorization", std::string("Bearer ") + kAdminToken},
                              {"Content-Type", "application/merge-patch+json"}});
      REQUIRE(r.status == 200);
    }
  }
}

json CliLab::call(const std::string& method, const std::string& target, const json& body, int expect) {
  auto r = admin->request(method, target, body.is_null() ? "" : body.dump(),
                         {{"Authorization", std::string("Bearer ") + kAdminToken}, {"Content-Type", "application/json"}});
  INFO(method << " " << target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status == expect);
  return r.body.empty() ? json() : json::parse(r.body);
}

void CliLab::wait_nodes(const std::string& state, int limit_s) {
  json last;
  bool ok = wait_until([&] {
    last = get("/v1/nodes");
    for (const json& n : last["nodes"])
      if (n["provision_state"] != state) return false;
    return true;
  }, std::chrono::seconds(limit_s), 50ms);
  INFO(last.dump(1));
  REQUIRE(ok);
}

std::string CliLab::write(const std::string& name, const std::string& text) const {
  const std::string p = dir.path() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

std::string CliLab::kiln_command(const std::string& args, const std::string& token, const std::string& url) const {
  return "env KILN_CONFIG=/nonexistent/kiln.yaml KILN_URL='" + (url.empty() ? this->url() : url) + "' KILN_TOKEN='" +
         (token.empty() ? tenant_token : token) + "' " + KILN_BINARY + " " + args;
}

KilnRun CliLab::kiln(const std::string& args, const std::string& token, const std::string& url) const {
  static int counter = 0;
  const std::string err_file = dir.path() + "/stderr." + std::to_string(++counter);
  kiln::test::CommandRun r = kiln::test::run_command(kiln_command(args, token, url) + " 2>" + err_file);
  KilnRun out;
  out.status = r.status;
  out.out = r.out;
  std::ifstream in(err_file);
  std::stringstream buf;
  buf << in.rdbuf();
  out.err = buf.str();
  return out;
}

}  // namespace kiln::testing
