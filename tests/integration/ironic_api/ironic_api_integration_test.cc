// Kiln's Ironic-compatible API against the real kilnd binary over loopback:
// what the real clients send on the create paths, and the tenant isolation
// matrix over every /ironic route (docs/ironic-api.md: roles and tenant
// isolation are /v1's; another tenant's node is 404, never 403).

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
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

namespace {

// Who calls, in the matrix's columns.
enum Who { kAdminCol, kOperatorCol, kTenantOwn, kTenantOther, kNoToken, kBadToken };
const char* const kWhoName[] = {"admin", "operator", "tenant on its own node", "tenant on another tenant's node",
                                "no token", "bad token"};
constexpr int kSkipCell = 0;  // a cell that does not apply (a route about no node)

struct Fleet {
  std::string operator_token, acme_token;
  std::string acme_id, globex_id;        // acme-0 (tenant acme), globex-0 (tenant globex)
  std::string acme_port, globex_port;    // their ports' UUIDs
};

void wait_for(HttpTestClient& c, const std::string& node, const std::string& state) {
  for (int i = 0; i < 200; ++i) {
    auto r = c.request("GET", "/v1/nodes/" + node, "", bearer());
    json n = body_json(r);
    const bool free = !n.contains("reservation") || n["reservation"].is_null();
    if (n.value("provision_state", "") == state && free) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL("node " << node << " never reached " << state);
}

Fleet make_fleet(HttpTestClient& c) {
  Fleet f;
  auto token = [&](const json& body) {
    auto r = c.request("POST", "/v1/tokens", body.dump(), bearer());
    INFO(r.body);
    REQUIRE(r.status == 201);
    return body_json(r)["token"].get<std::string>();
  };
  for (const std::string t : {"acme", "globex"})
    REQUIRE(c.request("POST", "/v1/tenants", json{{"name", t}}.dump(), bearer()).status == 201);
  f.operator_token = token({{"name", "ops"}, {"role", "operator"}});
  f.acme_token = token({{"name", "acme-cli"}, {"role", "tenant"}, {"tenant", "acme"}});
  int mac = 0;
  for (const std::string t : {"acme", "globex"}) {
    const std::string name = t + "-0";
    auto r = c.request("POST", "/v1/nodes",
                       json{{"name", name}, {"bmc", {{"driver", "fake"}, {"address", "bmc-" + t}}}}.dump(), bearer());
    INFO(r.body);
    REQUIRE(r.status == 201);
    const std::string id = body_json(r)["id"];
    // Inspected, so GET .../inventory has something to show to its owner.
    for (const std::string target : {"manage", "inspect"}) {
      REQUIRE(c.request("PUT", "/v1/nodes/" + id + "/states/provision", json{{"target", target}}.dump(), bearer()).status == 202);
      wait_for(c, id, "manageable");
    }
    auto p = c.request("POST", "/ironic/v1/ports",
                       json{{"address", "52:54:00:0f:00:0" + std::to_string(++mac)}, {"node_uuid", id}}.dump(),
                       ironic(kAdmin));
    INFO(p.body);
    REQUIRE(p.status == 201);
    auto patched = c.request("PATCH", "/v1/nodes/" + id, json{{"tenant", t}}.dump(),
                             {{"Authorization", "Bearer " + kAdmin}, {"Content-Type", "application/merge-patch+json"}});
    INFO(patched.body);
    REQUIRE(patched.status == 200);
    (t == "acme" ? f.acme_id : f.globex_id) = id;
    (t == "acme" ? f.acme_port : f.globex_port) = body_json(p)["uuid"];
  }
  return f;
}

// One route of the matrix: the request for a node (and its port), and the
// status expected in each column.
struct Row {
  std::string what;
  std::string method;
  std::function<std::string(const std::string& node, const std::string& port)> target;
  std::function<std::string(Who)> body;
  int expect[6];
};

}  // namespace

TEST_CASE("ironic tenant isolation matrix: every /ironic route x admin, operator, tenant own and other, no or bad token") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kAdmin, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  const Fleet f = make_fleet(c);
  auto none = [](Who) { return std::string(); };
  auto fixed = [](json b) { return [b](Who) { return b.dump(); }; };
  // Staff create a port each (and delete it again below); MACs by column.
  auto new_port = [&](Who w) {
    return json{{"address", "52:54:00:0e:00:0" + std::to_string(static_cast<int>(w))}, {"node_uuid", f.acme_id}}.dump();
  };
  std::map<Who, std::string> created_ports;
  const std::vector<Row> rows = {
      {"node list", "GET", [](auto&, auto&) { return "/v1/nodes"; }, none, {200, 200, 200, kSkipCell, 401, 401}},
      {"node list detail", "GET", [](auto&, auto&) { return "/v1/nodes/detail?provision_state=manageable"; }, none,
       {200, 200, 200, kSkipCell, 401, 401}},
      {"node list fields", "GET", [](auto&, auto&) { return "/v1/nodes?fields=uuid,name,owner"; }, none,
       {200, 200, 200, kSkipCell, 401, 401}},
      {"node create", "POST", [](auto&, auto&) { return "/v1/nodes"; },
       [](Who w) { return json{{"driver", "fake-hardware"}, {"name", "made-by-" + std::to_string(static_cast<int>(w))}}.dump(); },
       {201, 201, 403, kSkipCell, 401, 401}},
      {"node show", "GET", [](auto& n, auto&) { return "/v1/nodes/" + n; }, none, {200, 200, 200, 404, 401, 401}},
      {"node patch", "PATCH", [](auto& n, auto&) { return "/v1/nodes/" + n; },
       fixed(json::array({{{"op", "add"}, {"path", "/extra/rack"}, {"value", "r1"}}})), {200, 200, 403, 404, 401, 401}},
      // A node its tenant holds is not deletable (409), so nothing goes.
      {"node delete", "DELETE", [](auto& n, auto&) { return "/v1/nodes/" + n; }, none, {409, 409, 403, 404, 401, 401}},
      {"node states", "GET", [](auto& n, auto&) { return "/v1/nodes/" + n + "/states"; }, none, {200, 200, 200, 404, 401, 401}},
      {"provision", "PUT", [](auto& n, auto&) { return "/v1/nodes/" + n + "/states/provision"; },
       fixed({{"target", "no-such-verb"}}), {400, 400, 403, 404, 401, 401}},
      // Power is any role's on its own node (as /v1); a bad target is 400 after the role check.
      {"power", "PUT", [](auto& n, auto&) { return "/v1/nodes/" + n + "/states/power"; }, fixed({{"target", "no-such-target"}}),
       {400, 400, 400, 404, 401, 401}},
      {"maintenance set", "PUT", [](auto& n, auto&) { return "/v1/nodes/" + n + "/maintenance"; },
       fixed({{"reason", "matrix"}}), {202, 202, 403, 404, 401, 401}},
      {"maintenance unset", "DELETE", [](auto& n, auto&) { return "/v1/nodes/" + n + "/maintenance"; }, none,
       {202, 202, 403, 404, 401, 401}},
      {"validate", "GET", [](auto& n, auto&) { return "/v1/nodes/" + n + "/validate"; }, none, {200, 200, 403, 404, 401, 401}},
      {"inventory", "GET", [](auto& n, auto&) { return "/v1/nodes/" + n + "/inventory"; }, none, {200, 200, 200, 404, 401, 401}},
      {"node ports", "GET", [](auto& n, auto&) { return "/v1/nodes/" + n + "/ports"; }, none, {200, 200, 403, 404, 401, 401}},
      {"node ports detail", "GET", [](auto& n, auto&) { return "/v1/nodes/" + n + "/ports/detail"; }, none,
       {200, 200, 403, 404, 401, 401}},
      // Ports are staff-only, as /v1/ports; a port route names no node, so
      // another tenant's port is the same 403 as its own.
      {"port list", "GET", [](auto&, auto&) { return "/v1/ports"; }, none, {200, 200, 403, kSkipCell, 401, 401}},
      {"port list detail", "GET", [](auto&, auto&) { return "/v1/ports/detail"; }, none, {200, 200, 403, kSkipCell, 401, 401}},
      {"port show", "GET", [](auto&, auto& p) { return "/v1/ports/" + p; }, none, {200, 200, 403, 403, 401, 401}},
      {"port create", "POST", [](auto&, auto&) { return "/v1/ports"; }, new_port, {201, 201, 403, kSkipCell, 401, 401}},
      {"port delete", "DELETE", [&](auto&, auto& p) { return "/v1/ports/" + p; }, none, {204, 204, 403, 403, 401, 401}},
      {"driver list", "GET", [](auto&, auto&) { return "/v1/drivers"; }, none, {200, 200, 200, kSkipCell, 401, 401}},
      {"driver show", "GET", [](auto&, auto&) { return "/v1/drivers/redfish"; }, none, {200, 200, 200, kSkipCell, 401, 401}},
  };
  for (const Row& row : rows) {
    for (Who w : {kAdminCol, kOperatorCol, kTenantOwn, kTenantOther, kNoToken, kBadToken}) {
      const int expected = row.expect[w];
      if (expected == kSkipCell) continue;
      const std::string token = w == kAdminCol ? kAdmin : w == kOperatorCol ? f.operator_token
                                : w == kNoToken ? std::string() : w == kBadToken ? "kiln_not_a_token_of_this_kilnd_00"
                                                                                 : f.acme_token;
      const std::string& node = w == kTenantOther ? f.globex_id : f.acme_id;
      std::string port = w == kTenantOther ? f.globex_port : f.acme_port;
      // Staff delete the port they created, not the fleet's.
      if (row.what == "port delete" && (w == kAdminCol || w == kOperatorCol)) port = created_ports[w];
      const std::string target = row.target(node, port);
      auto r = c.request(row.method, "/ironic" + target, row.body(w), ironic(token, "1.81"));
      INFO(row.what << " as " << kWhoName[w] << ": " << row.method << " " << target << " -> " << r.status << " " << r.body);
      CHECK(r.status == expected);
      // Every reply carries the version headers; every error Ironic's body.
      CHECK(r.header("X-OpenStack-Ironic-API-Version") == "1.81");
      CHECK_FALSE(r.header("X-OpenStack-Ironic-API-Minimum-Version").empty());
      CHECK_FALSE(r.header("X-OpenStack-Ironic-API-Maximum-Version").empty());
      if (r.status >= 400) {
        CHECK(faultstring(r).rfind("<", 0) != 0);
        CHECK(r.header("Content-Type") == "application/json");
      }
      // Nothing a tenant reads names the other tenant's node or port beyond
      // the id it sent: the answer is the one for a node that does not exist.
      if (w == kTenantOwn) {
        CHECK(r.body.find(f.globex_id) == std::string::npos);
        CHECK(r.body.find("globex") == std::string::npos);
        CHECK(r.body.find(f.globex_port) == std::string::npos);
      }
      if (w == kTenantOther) {
        const std::string absent = "0f0f0f0f-0000-4000-8000-000000000000";
        std::string same = row.target(absent, port == f.globex_port ? absent : port);
        auto a = c.request(row.method, "/ironic" + same, row.body(w), ironic(token, "1.81"));
        std::string masked = r.body;
        for (const std::string& id : {f.globex_id, f.globex_port})
          for (std::size_t at = masked.find(id); at != std::string::npos; at = masked.find(id, at)) masked.replace(at, id.size(), absent);
        CHECK(a.status == r.status);
        CHECK(a.body == masked);
        CHECK(r.body.find("globex") == std::string::npos);
      }
      if (row.what == "port create" && r.status == 201) created_ports[w] = body_json(r)["uuid"];
      if (w == kTenantOwn && r.status == 200 && row.what.rfind("node list", 0) == 0) {
        json b = body_json(r);
        REQUIRE(b["nodes"].size() == 1);
        CHECK(b["nodes"][0]["uuid"] == f.acme_id);
      }
    }
  }
  // The refused calls changed nothing of globex-0 and deleted nothing.
  auto g = body_json(c.request("GET", "/v1/nodes/" + f.globex_id, "", bearer()));
  CHECK(g["tenant"] == "globex");
  CHECK(g["maintenance"] == false);
  CHECK(g["provision_state"] == "manageable");
  CHECK(c.request("GET", "/v1/ports/" + f.globex_port, "", bearer()).status == 200);
  // Pages a tenant follows never reach the other's node either.
  std::string next = "/ironic/v1/nodes?limit=1";
  int pages = 0;
  while (!next.empty() && pages < 5) {
    auto r = c.request("GET", next, "", ironic(f.acme_token));
    REQUIRE(r.status == 200);
    CHECK(r.body.find(f.globex_id) == std::string::npos);
    const std::string abs = body_json(r).value("next", "");
    next = abs.empty() ? "" : abs.substr(abs.find("/ironic/"));
    ++pages;
  }
  CHECK(pages == 1);
}

TEST_CASE("ironic inventory: 404 in Ironic's shape before inspection and below 1.81") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kAdmin, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  auto r = c.request("POST", "/ironic/v1/nodes", json{{"driver", "fake-hardware"}, {"name", "inv-0"}}.dump(), ironic(kAdmin));
  REQUIRE(r.status == 201);
  const std::string id = body_json(r)["uuid"];
  auto never = c.request("GET", "/ironic/v1/nodes/inv-0/inventory", "", ironic(kAdmin, "1.81"));
  CHECK(never.status == 404);
  CHECK(faultstring(never) == "Node inventory record for node " + id + " could not be found.");
  for (const std::string target : {"manage", "inspect"}) {
    REQUIRE(c.request("PUT", "/ironic/v1/nodes/inv-0/states/provision", json{{"target", target}}.dump(), ironic(kAdmin)).status == 202);
    wait_for(c, id, "manageable");
  }
  auto old = c.request("GET", "/ironic/v1/nodes/inv-0/inventory", "", ironic(kAdmin, "1.80"));
  CHECK(old.status == 404);
  CHECK(old.header("X-OpenStack-Ironic-API-Version") == "1.80");
  auto inv = c.request("GET", "/ironic/v1/nodes/inv-0/inventory", "", ironic(kAdmin, "1.81"));
  INFO(inv.body);
  REQUIRE(inv.status == 200);
  json b = body_json(inv);
  CHECK(b["inventory"]["system_vendor"]["manufacturer"] == "Kiln");
  CHECK(b["inventory"]["interfaces"].is_array());
  CHECK(b["plugin_data"]["source"] == "fake");
}

TEST_CASE("ironic instance_info: the config drive reads back masked, and undeploy empties instance_info as Ironic's tear-down") {
  TempDir dir;
  const std::string images = dir.path() + "/img";
  std::filesystem::create_directory(images);
  { std::ofstream(images + "/demo.img") << std::string(4096, '\0'); }
  KilndProcess k(dir.path() + "/data", {"--bootstrap-token", kAdmin, "--power-sync-interval", "0", "--image-dir", images});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  auto img = c.request("POST", "/v1/images",
                       json{{"name", "demo-os"}, {"kind", "os"}, {"format", "raw"}, {"public", true},
                            {"source", images + "/demo.img"}, {"size", 4096},
                            {"sha256", "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7"}}.dump(),
                       bearer());
  INFO(img.body);
  REQUIRE(img.status / 100 == 2);
  auto r = c.request("POST", "/ironic/v1/nodes", json{{"driver", "fake-hardware"}, {"name", "cd-0"}}.dump(), ironic(kAdmin));
  REQUIRE(r.status == 201);
  const std::string id = body_json(r)["uuid"];
  // A mask for a drive the node does not have is refused, naming the field.
  auto no_drive = c.request("PATCH", "/ironic/v1/nodes/cd-0",
                            json::array({{{"op", "add"}, {"path", "/instance_info/configdrive"}, {"value", "******"}}}).dump(),
                            ironic(kAdmin));
  CHECK(no_drive.status == 400);
  CHECK(faultstring(no_drive).find("/instance_info/configdrive") != std::string::npos);
  for (auto [target, state] : {std::pair{"manage", "manageable"}, std::pair{"provide", "available"}}) {
    REQUIRE(c.request("PUT", "/ironic/v1/nodes/cd-0/states/provision", json{{"target", target}}.dump(), ironic(kAdmin)).status == 202);
    wait_for(c, id, state);
  }
  auto set = c.request("PATCH", "/ironic/v1/nodes/cd-0",
                       json::array({{{"op", "add"}, {"path", "/instance_info/image_source"}, {"value", "demo-os"}}}).dump(),
                       ironic(kAdmin));
  REQUIRE(set.status == 200);
  const std::string secret = "#cloud-config\nruncmd: [echo kiln-secret-user-data]\n";
  auto deploy = c.request("PUT", "/ironic/v1/nodes/cd-0/states/provision",
                          json{{"target", "active"}, {"configdrive", {{"meta_data", {{"hostname", "cd-0"}}}, {"user_data", secret}}}}.dump(),
                          ironic(kAdmin));
  INFO(deploy.body);
  REQUIRE(deploy.status == 202);
  wait_for(c, id, "active");
  auto shown = c.request("GET", "/ironic/v1/nodes/cd-0", "", ironic(kAdmin));
  REQUIRE(shown.status == 200);
  CHECK(body_json(shown)["instance_info"]["configdrive"] == "******");
  CHECK(body_json(shown)["instance_info"]["image_source"] == "demo-os");
  CHECK(shown.body.find("kiln-secret-user-data") == std::string::npos);
  auto listed = c.request("GET", "/ironic/v1/nodes/detail", "", ironic(kAdmin));
  CHECK(listed.body.find("kiln-secret-user-data") == std::string::npos);
  // A PATCH of the read document (the mask sent back) keeps the stored drive.
  auto keep = c.request("PATCH", "/ironic/v1/nodes/cd-0",
                        json::array({{{"op", "add"}, {"path", "/instance_info/note"}, {"value", "x"}}}).dump(), ironic(kAdmin));
  INFO(keep.body);
  CHECK(keep.status == 200);
  CHECK(body_json(keep)["instance_info"]["configdrive"] == "******");
  auto again = c.request("PATCH", "/ironic/v1/nodes/cd-0",
                         json::array({{{"op", "replace"}, {"path", "/instance_info/configdrive"}, {"value", "******"}}}).dump(),
                         ironic(kAdmin));
  CHECK(again.status == 200);
  // Undeploy: Ironic's tear-down leaves instance_info empty.
  REQUIRE(c.request("PUT", "/ironic/v1/nodes/cd-0/states/provision", json{{"target", "deleted"}}.dump(), ironic(kAdmin)).status == 202);
  wait_for(c, id, "available");
  auto after = c.request("GET", "/ironic/v1/nodes/cd-0", "", ironic(kAdmin));
  CHECK(body_json(after)["instance_info"] == json::object());
  CHECK(body_json(after)["instance_uuid"].is_null());
}
