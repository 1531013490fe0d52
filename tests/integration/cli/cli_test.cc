// kiln against a real kilnd: exit codes, one-line API errors, and every
// output format of every resource.
#include <catch2/catch.hpp>

#include <yaml-cpp/yaml.h>

#include "cli_lab.h"

using namespace kiln::testing;
using nlohmann::json;

namespace {

std::string alloc_args(int count, const std::string& key = CliLab::kKey) {
  return "alloc create --profile cpu-lab --kind baremetal --count " + std::to_string(count) +
         " --image demo-os --ssh-key '" + key + "'";
}

}  // namespace

TEST_CASE("kiln: exit codes 0 1 2 and 4 with each failure one line naming the field") {
  CliLab lab;
  const std::string admin = CliLab::kAdminToken;

  KilnRun r = lab.kiln("node list", admin);
  CHECK(r.status == 0);
  CHECK(r.out.find("a0") != std::string::npos);

  r = lab.kiln("node show no-such-node", admin);
  CHECK(r.status == 1);
  CHECK(r.err.rfind("error: ", 0) == 0);

  r = lab.kiln("node list --bogus", admin);
  CHECK(r.status == 2);
  CHECK(r.err == "error: --bogus: unknown flag for this command (see --help)\n");
  r = lab.kiln("node list -o xml", admin);
  CHECK(r.status == 2);
  CHECK(r.err == "error: -o: must be one of table, json, yaml, value (got xml)\n");
  r = lab.kiln("frobnicate", admin);
  CHECK(r.status == 2);
  r = lab.kiln("node list", admin, "not-a-url");
  CHECK(r.status == 2);
  CHECK(r.err.rfind("error: --url: ", 0) == 0);
  r = lab.kiln("alloc create --count 1 --wait --timeout forever", admin);
  CHECK(r.status == 2);
  CHECK(r.err.rfind("error: --timeout: ", 0) == 0);

  // The API's 400 naming a field: usage or bad input.
  r = lab.kiln(alloc_args(1, "ssh-ed25519 not-base64 x"));
  CHECK(r.status == 2);
  CHECK(r.err.rfind("error: /ssh_keys/0: ", 0) == 0);

  // No capacity (409 /count) and over quota (403 /count): 4.
  r = lab.kiln(alloc_args(4));
  CHECK(r.status == 4);
  CHECK(r.err == "error: /count: 4 requested, 3 available\n");
  r = lab.kiln(alloc_args(5));
  CHECK(r.status == 4);
  CHECK(r.err == "error: /count: quota for cpu-lab baremetal is 4, 0 in use\n");
  CHECK(lab.get("/v1/allocations")["allocations"].empty());  // nothing reserved by the refusals

  // --help lists every command.
  r = lab.kiln("--help", admin);
  CHECK(r.status == 0);
  for (const char* verb : {"node list", "node power", "node maintenance", "image register", "alloc create",
                           "alloc renew", "cluster up", "cluster down", "events", "validation show", "usage"})
    CHECK(r.out.find(verb) != std::string::npos);
}

TEST_CASE("kiln: -o json yaml table and value for each resource") {
  CliLab lab({.nodes = 1, .quota = 1});
  const std::string admin = CliLab::kAdminToken;
  KilnRun made = lab.kiln(alloc_args(1) + " --name job -o json");
  REQUIRE(made.status == 0);
  const json alloc = json::parse(made.out);
  CHECK(alloc["name"] == "job");

  struct Case {
    std::string args;
    std::string key;  // the list's key in the JSON, "" for one resource
  };
  const std::vector<Case> cases = {
      {"node list", "nodes"},          {"node show a0", ""},
      {"image list", "images"},        {"profile list", "profiles"},
      {"profile show cpu-lab", ""},    {"tenant list", "tenants"},
      {"tenant show acme", ""},        {"token list", "tokens"},
      {"port list", "ports"},          {"host list", "hosts"},
      {"alloc list", "allocations"},   {"alloc show job", ""},
      {"availability", "availability"}, {"usage", "usage"},
      {"events --limit 5", "events"},  {"validation list a0", "validations"},
  };
  for (const Case& c : cases) {
    INFO(c.args);
    KilnRun j = lab.kiln(c.args + " -o json", admin);
    REQUIRE(j.status == 0);
    const json doc = json::parse(j.out);
    if (!c.key.empty()) CHECK(doc[c.key].is_array());
    KilnRun y = lab.kiln(c.args + " -o yaml", admin);
    REQUIRE(y.status == 0);
    YAML::Node yn = YAML::Load(y.out);
    CHECK(yn.IsMap());
    if (!c.key.empty()) CHECK(yn[c.key].size() == doc[c.key].size());
    KilnRun t = lab.kiln(c.args, admin);
    REQUIRE(t.status == 0);
    const std::string header = t.out.substr(0, t.out.find('\n'));
    CHECK_FALSE(header.empty());
    for (char ch : header) CHECK_FALSE(std::islower(static_cast<unsigned char>(ch)));  // a header row
    KilnRun v = lab.kiln(c.args + " -o value", admin);
    CHECK(v.status == 0);
    CHECK(v.out.find('\x1b') == std::string::npos);
  }
  // -c picks columns; value prints them bare for shell loops.
  KilnRun v = lab.kiln("node list -o value -c name -c provision_state", admin);
  CHECK(v.status == 0);
  CHECK(v.out.rfind("a0\t", 0) == 0);
  CHECK(std::count(v.out.begin(), v.out.end(), '\n') == 1);
  // Times: ISO 8601 in JSON, relative in tables.
  KilnRun tj = lab.kiln("alloc list --long -o json");
  CHECK(json::parse(tj.out)["allocations"][0]["created_at"].get<std::string>().find('T') == 10);
  KilnRun tt = lab.kiln("alloc list --long");
  CHECK(tt.out.find(" ago") != std::string::npos);
}
