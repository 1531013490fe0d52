// Kiln's Ironic-compatible API against the real kilnd binary over loopback:
// what the real clients send on the create paths, and the tenant isolation
// matrix over every /ironic route (docs/ironic-api.md: roles and tenant
// isolation are /v1's; another tenant's node is 404, never 403).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/kilnd/kilnd_process.h"
#include "tests/support/http_test_client.h"

using namespace kiln::testing;
using nlohmann::json;

namespace {

const std::string kAdmin = "kiln_ironic_integration_admin_001";

Headers ironic(const std::string& token, const std::string& version = "1.78") {
  Headers h;
  if (!token.empty()) h["X-Auth-Token"] = token;
  if (!version.empty()) h["X-OpenStack-Ironic-API-Version"] = version;
  return h;
}
Headers bearer(const std::string& t = kAdmin) { return {{"Authorization", "Bearer " + t}}; }
json body_json(const TestResponse& r) { return json::parse(r.body, nullptr, false); }

// Ironic's error body: {"error_message": "<JSON string with faultstring>"}.
std::string faultstring(const TestResponse& r) {
  json b = body_json(r);
  if (!b.is_object() || !b.contains("error_message") || !b["error_message"].is_string()) return "<not Ironic's error body>";
  json inner = json::parse(b["error_message"].get<std::string>(), nullptr, false);
  if (!inner.is_object() || !inner.contains("faultstring") || !inner["faultstring"].is_string()) return "<no faultstring>";
  return inner["faultstring"].get<std::string>();
}

}  // namespace

TEST_CASE("ironic create paths: an unversioned path is /v1 as Ironic's root routes it, next links name /v1") {
  // openstacksdk with keystoneauth's admin_token plugin sends its requests to
  // the endpoint as given: POST .../ironic/nodes, GET .../ironic/nodes?limit=1.
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kAdmin, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  for (const std::string name : {"sdk-a", "sdk-b"}) {
    auto r = c.request("POST", "/ironic/nodes", json{{"driver", "fake-hardware"}, {"name", name}}.dump(), ironic(kAdmin, "1.76"));
    INFO(r.body);
    REQUIRE(r.status == 201);
    CHECK(body_json(r)["provision_state"] == "enroll");
    CHECK(r.header("X-OpenStack-Ironic-API-Version") == "1.76");
  }
  auto one = c.request("GET", "/ironic/nodes/sdk-a", "", ironic(kAdmin));
  CHECK(one.status == 200);
  CHECK(body_json(one)["name"] == "sdk-a");
  auto page = c.request("GET", "/ironic/nodes?limit=1", "", ironic(kAdmin));
  REQUIRE(page.status == 200);
  const std::string next = body_json(page).value("next", "");
  INFO(next);
  CHECK(next.rfind("http://127.0.0.1:" + std::to_string(k.port()) + "/ironic/v1/nodes?", 0) == 0);
  CHECK(next.find("marker=") != std::string::npos);
  // The rest of the prefix's namespace stays 404 in Ironic's shape.
  auto nosuch = c.request("GET", "/ironic/v2/nodes", "", ironic(kAdmin));
  CHECK(nosuch.status == 404);
  CHECK(faultstring(nosuch).find("no such resource") != std::string::npos);
}

TEST_CASE("ironic create paths: fake-hardware with no driver_info, available at 1.10, enroll at 1.11") {
  // `openstack baremetal node create --driver fake-hardware` sends no
  // driver_info; Kiln's fake driver wants a BMC address it never contacts.
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kAdmin, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  auto v110 = c.request("POST", "/ironic/v1/nodes", json{{"driver", "fake-hardware"}, {"name", "v110-0"}}.dump(),
                        ironic(kAdmin, "1.10"));
  INFO(v110.body);
  REQUIRE(v110.status == 201);
  CHECK(body_json(v110)["provision_state"] == "available");
  CHECK(body_json(v110)["driver_info"] == json::object());
  auto v111 = c.request("POST", "/ironic/v1/nodes", json{{"driver", "fake-hardware"}, {"name", "v111-0"}}.dump(),
                        ironic(kAdmin, "1.11"));
  INFO(v111.body);
  REQUIRE(v111.status == 201);
  CHECK(body_json(v111)["provision_state"] == "enroll");
  // The same node on /v1, and `manage` verifies it with the fake driver.
  auto v1 = c.request("GET", "/v1/nodes/v111-0", "", bearer());
  REQUIRE(v1.status == 200);
  CHECK(body_json(v1)["bmc"]["driver"] == "fake");
  auto manage = c.request("PUT", "/ironic/v1/nodes/v111-0/states/provision", json{{"target", "manage"}}.dump(),
                          ironic(kAdmin));
  INFO(manage.body);
  CHECK(manage.status == 202);
  for (const std::string name : {"v110-0"}) {
    auto d = c.request("DELETE", "/ironic/v1/nodes/" + name, "", ironic(kAdmin));
    CHECK(d.status == 204);
  }
}
