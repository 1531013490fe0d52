// kill -9 kilnd while an allocation's members are deploying, and again while
// they are being released: after each restart the allocation carries on to
// ready, then to released, with every node accounted for (nothing stuck,
// nothing left claimed, nothing back in the pool uncleaned).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "kiln_alloc_restart_admin_token_01";
const char* const kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 ci@example";

Headers bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}};
}

json call(HttpTestClient& c, const std::string& method, const std::string& target, const json& body, int expect,
          const std::string& token = kToken) {
  auto r = c.request(method, target, body.is_null() ? "" : body.dump(), bearer(token));
  INFO(method << " " << target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status == expect);
  return r.body.empty() ? json() : json::parse(r.body);
}

json get(HttpTestClient& c, const std::string& target) { return call(c, "GET", target, json(), 200); }

json wait_allocation(HttpTestClient& c, const std::string& id, const std::string& state, std::chrono::seconds limit) {
  json a;
  bool ok = wait_until([&] {
    a = get(c, "/v1/allocations/" + id);
    return a["state"] == state;
  }, limit, 50ms);
  INFO(a.dump(2));
  REQUIRE(ok);
  return a;
}

}  // namespace

TEST_CASE("allocations: kill -9 while members deploy and again while they are released, and both resume") {
  TempDir dir;
  const std::string images = dir.path() + "/img";
  std::filesystem::create_directories(images);
  { std::ofstream(images + "/demo.img") << std::string(4096, '\0'); }
  std::vector<std::string> flags = {"--bootstrap-token", kToken, "--image-dir", images,
                                    "--allocation-interval-ms", "100", "--power-sync-interval", "0"};
  std::string id;
  std::string tenant_token;
  std::set<std::string> members;
  {
    KilndProcess k(dir.path(), flags);
    k.start();
    HttpTestClient c("127.0.0.1", k.port());
    call(c, "POST", "/v1/images", {{"name", "demo-os"}, {"kind", "os"}, {"format", "raw"},
                                   {"source", images + "/demo.img"}, {"public", true}, {"size", 4096},
                                   // sha256 of 4096 zero bytes
                                   {"sha256", "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7"}},
         201);
    call(c, "POST", "/v1/tenants", {{"name", "acme"}, {"quotas", json::array({{{"profile", "cpu-lab"},
                                                                                {"kind", "baremetal"},
                                                                                {"max_nodes", 4}}})}}, 201);
    tenant_token = call(c, "POST", "/v1/tokens", {{"name", "ci"}, {"role", "tenant"}, {"tenant", "acme"}}, 201)["token"];
    for (int i = 0; i < 4; ++i) {
      std::string name = "a" + std::to_string(i);
      call(c, "POST", "/v1/nodes", {{"name", name}, {"profile", "cpu-lab"},
                                    {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}}}}, 201);
      call(c, "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "manage"}}, 202);
      REQUIRE(wait_until([&] { return get(c, "/v1/nodes/" + name)["provision_state"] == "manageable"; }, 20s));
      call(c, "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "provide"}}, 202);
      REQUIRE(wait_until([&] { return get(c, "/v1/nodes/" + name)["provision_state"] == "available"; }, 20s));
      // Slow from here on: deploy, validation and cleaning take 1.5 s each.
      auto r = c.request("PATCH", "/v1/nodes/" + name, json{{"bmc", {{"options", {{"step_delay_ms", 1500}}}}}}.dump(),
                         {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/merge-patch+json"}});
      REQUIRE(r.status == 200);
    }
    json a = call(c, "POST", "/v1/allocations", {{"name", "job"}, {"profile", "cpu-lab"}, {"kind", "baremetal"},
                                                 {"count", 3}, {"image", "demo-os"},
                                                 {"ssh_keys", json::array({kKey})}}, 202, tenant_token);
    id = a["id"];
    REQUIRE(wait_until([&] {
      json now = get(c, "/v1/allocations/" + id);
      int deploying = 0;
      for (const json& n : now["nodes"]) deploying += n["state"] == "deploying" ? 1 : 0;
      return deploying == 3;
    }, 20s, 20ms));
    k.kill9();
  }
  {
    KilndProcess k(dir.path(), flags);
    k.start();
    HttpTestClient c("127.0.0.1", k.port());
    json ready = wait_allocation(c, id, "ready", 60s);
    REQUIRE(ready["nodes"].size() == 3);
    for (const json& n : ready["nodes"]) {
      CHECK(n["state"] == "active");
      members.insert(n["id"].get<std::string>());
    }
    CHECK(ready["replacements"] == 0);  // resumed, not failed and replaced
    call(c, "DELETE", "/v1/allocations/" + id, json(), 202, tenant_token);
    REQUIRE(wait_until([&] {
      int cleaning = 0;
      for (const std::string& n : members) cleaning += get(c, "/v1/nodes/" + n)["provision_state"] == "cleaning";
      return cleaning == 3;
    }, 20s, 20ms));
    CHECK(get(c, "/v1/allocations/" + id)["state"] == "releasing");
    k.kill9();
  }
  KilndProcess k(dir.path(), flags);
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  json released = wait_allocation(c, id, "released", 60s);
  CHECK(released["former_nodes"].size() == 3);
  for (const std::string& n : members) {
    json node = get(c, "/v1/nodes/" + n);
    INFO(node.dump());
    CHECK(node["provision_state"] == "available");  // cleaned (resumed across the kill), then back in the pool
    CHECK(node["tenant"].is_null());
    CHECK(node["allocation"].is_null());
  }
  // Usage closed at the release, one row per member.
  json usage = call(c, "GET", "/v1/usage", json(), 200, tenant_token);
  REQUIRE(usage["usage"].size() == 3);
  for (const json& row : usage["usage"]) CHECK(row["ended_at"].is_string());
  // Events stayed strictly ordered across both kills.
  json events = get(c, "/v1/events?limit=1000");
  int64_t last = 0;
  for (const json& e : events["events"]) {
    CHECK(e["seq"].get<int64_t>() > last);
    last = e["seq"];
  }
}
