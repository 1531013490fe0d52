// Node verbs through the API: provision (202, conductor conflicts), power,
// maintenance, inventory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <thread>

#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;
using V = http::bhttp::verb;

TEST_CASE("provision verbs: 202 with the moved node, conflicts from the state machine") {
  ApiHarness h;
  json n = h.enroll("v1");
  std::string id = n["id"];
  auto verb = [&](const json& body) {
    return h.call_json(V::put, "/v1/nodes/v1/states/provision", h.admin(), body);
  };

  Resp bad = verb({{"target", "explode"}});
  CHECK(bad.status == 400);
  CHECK(bad.field() == "/target");
  CHECK(bad.json["errors"][0]["message"] == "must be one of manage, inspect, provide, deploy, undeploy, abort");
  CHECK(verb({{"target", 1}}).has_field("/target", "must be a string"));
  CHECK(verb(json::object()).has_field("/target", "required"));
  CHECK(verb({{"target", "manage"}, {"when", "now"}}).has_field("/when", "unknown field"));
  CHECK(h.call(V::put, "/v1/nodes/v1/states/provision", h.admin(), "{\"target\":").status == 400);
  CHECK(h.call_json(V::put, "/v1/nodes/ghost/states/provision", h.admin(), {{"target", "manage"}}).status == 404);

  Resp wrong = verb({{"target", "deploy"}});
  CHECK(wrong.status == 409);
  CHECK(wrong.json["detail"].get<std::string>().find("cannot deploy a node in state enroll") != std::string::npos);

  Resp ok = verb({{"target", "manage"}});
  INFO(ok.body);
  REQUIRE(ok.status == 202);
  CHECK(ok.header("location") == "/v1/nodes/" + id);
  CHECK_FALSE(ok.header("etag").empty());
  CHECK(ok.json["provision_state"] == "verifying");
  CHECK(ok.json["target_provision_state"] == "manageable");
  h.wait_state(id, "manageable");

  REQUIRE(verb({{"target", "inspect"}}).status == 202);
  h.wait_state(id, "manageable");
  Resp inv = h.call(V::get, "/v1/nodes/v1/inventory", h.admin());
  INFO(inv.body);
  CHECK(inv.status == 200);
  CHECK(inv.json.is_object());
  CHECK_FALSE(inv.json.empty());

  REQUIRE(verb({{"target", "provide"}}).status == 202);
  h.wait_state(id, "available");
  // An allocation: deploy only, a short id; listed with ?allocation=; undeploy clears it.
  CHECK(verb({{"target", "deploy"}, {"image", "ubuntu-24.04"}, {"allocation", "a b"}})
            .has_field("/allocation", "must be 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit"));
  CHECK(verb({{"target", "deploy"}, {"image", "ubuntu-24.04"}, {"allocation", std::string(65, 'a')}}).field() ==
        "/allocation");
  CHECK(verb({{"target", "deploy"}, {"allocation", 7}}).has_field("/allocation", "must be a string"));
  CHECK(verb({{"target", "undeploy"}, {"allocation", "job-1"}}).has_field("/allocation", "only allowed with target deploy"));
  Resp deploy = verb({{"target", "deploy"}, {"image", "ubuntu-24.04"}, {"allocation", "job-1"}});
  REQUIRE(deploy.status == 202);
  CHECK(deploy.json["allocation"] == "job-1");
  h.wait_state(id, "active");
  Resp listed = h.call(V::get, "/v1/nodes?allocation=job-1", h.admin());
  REQUIRE(listed.json["nodes"].size() == 1);
  CHECK(listed.json["nodes"][0]["id"] == id);
  CHECK(h.call(V::get, "/v1/nodes?allocation=job-2", h.admin()).json["nodes"].empty());
  REQUIRE(verb({{"target", "undeploy"}}).status == 202);
  h.wait_state(id, "available");
  CHECK(h.call(V::get, "/v1/nodes/v1", h.admin()).json["allocation"].is_null());
}

TEST_CASE("inventory is 404 until the node has been inspected") {
  ApiHarness h;
  h.enroll("i1");
  Resp r = h.call(V::get, "/v1/nodes/i1/inventory", h.admin());
  CHECK(r.status == 404);
  CHECK(r.json["detail"] == "node has not been inspected");
}

TEST_CASE("power verbs: 202, bad target 400") {
  ApiHarness h;
  json n = h.enroll("pw1");
  auto power = [&](const json& body) {
    return h.call_json(V::put, "/v1/nodes/pw1/states/power", h.admin(), body);
  };
  Resp bad = power({{"target", "sideways"}});
  CHECK(bad.status == 400);
  CHECK(bad.field() == "/target");
  Resp on = power({{"target", "on"}});
  INFO(on.body);
  REQUIRE(on.status == 202);
  CHECK(on.json["target_power_state"] == "on");
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  json cur;
  while (std::chrono::steady_clock::now() < end) {
    cur = h.call(V::get, "/v1/nodes/pw1", h.admin()).json;
    if (cur["power_state"] == "on" && cur["target_power_state"].is_null()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(cur["power_state"] == "on");
  CHECK(h.call_json(V::put, "/v1/nodes/pw1/states/power", h.admin(), {{"target", "soft_off"}}).status == 202);
}

TEST_CASE("maintenance: set with a reason, clear also clears fault, both write events") {
  ApiHarness h;
  json n = h.enroll("m1");
  std::string id = n["id"];
  Resp set = h.call_json(V::put, "/v1/nodes/m1/maintenance", h.admin(), {{"reason", "bad DIMM"}});
  INFO(set.body);
  REQUIRE(set.status == 200);
  CHECK(set.json["maintenance"] == true);
  CHECK(set.json["maintenance_reason"] == "bad DIMM");
  CHECK(h.call_json(V::put, "/v1/nodes/m1/maintenance", h.admin(), {{"reason", 5}}).field() == "/reason");
  CHECK(h.call_json(V::put, "/v1/nodes/m1/maintenance", h.admin(), {{"why", "x"}}).field() == "/why");

  // A fault set by a periodic check.
  REQUIRE(h.store().update_node_if(id, {}, [](Node& m) { m.fault = "power_failure"; return ok_status(); }, {}));
  Resp clear = h.call(V::delete_, "/v1/nodes/m1/maintenance", h.admin());
  REQUIRE(clear.status == 200);
  CHECK(clear.json["maintenance"] == false);
  CHECK(clear.json["maintenance_reason"].is_null());
  CHECK(clear.json["fault"].is_null());

  auto events = h.store().list_events(0, 100, id, std::nullopt);
  REQUIRE(events);
  std::vector<std::string> types;
  for (const auto& e : *events) types.push_back(e.type);
  CHECK(std::count(types.begin(), types.end(), "node.maintenance_set") == 1);
  CHECK(std::count(types.begin(), types.end(), "node.maintenance_cleared") == 1);

  // Maintenance blocks provide (the conductor's rule), reported as 409.
  REQUIRE(h.call(V::put, "/v1/nodes/m1/maintenance", h.admin(), "").status == 200);
  REQUIRE(h.call_json(V::put, "/v1/nodes/m1/states/provision", h.admin(), {{"target", "manage"}}).status == 202);
  h.wait_state(id, "manageable");
  Resp provide = h.call_json(V::put, "/v1/nodes/m1/states/provision", h.admin(), {{"target", "provide"}});
  CHECK(provide.status == 409);
  CHECK(provide.json["detail"].get<std::string>().find("maintenance") != std::string::npos);
}

TEST_CASE("ports: create, duplicate MAC, list, get, delete") {
  ApiHarness h;
  json n = h.enroll("pt1");
  h.enroll("pt2");
  Resp c = h.call_json(V::post, "/v1/ports", h.admin(), {{"node", "pt1"}, {"address", "52-54-00-AB-00-01"}});
  INFO(c.body);
  REQUIRE(c.status == 201);
  CHECK(c.json["address"] == "52:54:00:ab:00:01");
  CHECK(c.json["node"] == n["id"]);
  CHECK(c.json["pxe"] == true);
  std::string port_id = c.json["id"];
  CHECK(c.header("location") == "/v1/ports/" + port_id);

  Resp dup = h.call_json(V::post, "/v1/ports", h.admin(), {{"node", "pt2"}, {"address", "52:54:00:ab:00:01"}});
  CHECK(dup.status == 409);
  CHECK(dup.field() == "/address");
  CHECK(h.call_json(V::post, "/v1/ports", h.admin(), {{"node", "pt1"}, {"address", "xx"}}).field() == "/address");
  CHECK(h.call_json(V::post, "/v1/ports", h.admin(), {{"node", "nope"}, {"address", mac(5)}}).field() == "/node");
  CHECK(h.call_json(V::post, "/v1/ports", h.admin(), {{"address", mac(5)}}).has_field("/node", "required"));
  CHECK(h.call_json(V::post, "/v1/ports", h.admin(), {{"node", "pt1"}, {"address", mac(5)}, {"pxe", "yes"}})
            .has_field("/pxe", "must be a boolean"));

  for (int i = 10; i < 14; ++i)
    REQUIRE(h.call_json(V::post, "/v1/ports", h.admin(), {{"node", "pt2"}, {"address", mac(i)}}).status == 201);
  // Pages over all five ports.
  std::set<std::string> seen;
  std::string target = "/v1/ports?limit=2";
  for (int pages = 0; pages < 5; ++pages) {
    Resp r = h.call(V::get, target, h.admin());
    REQUIRE(r.status == 200);
    for (const auto& p : r.json["ports"]) seen.insert(p["id"]);
    if (r.json["next"].is_null()) break;
    target = r.json["next"].get<std::string>().substr(std::string("http://kiln.test:8080").size());
  }
  CHECK(seen.size() == 5);
  CHECK(h.call(V::get, "/v1/ports?node=pt1", h.admin()).json["ports"].size() == 1);
  CHECK(h.call(V::get, "/v1/ports?node=ghost", h.admin()).field() == "node");
  CHECK(h.call(V::get, "/v1/ports?mac=x", h.admin()).field() == "mac");

  CHECK(h.call(V::get, "/v1/ports/" + port_id, h.admin()).json["address"] == "52:54:00:ab:00:01");
  CHECK(h.call(V::delete_, "/v1/ports/" + port_id, h.admin()).status == 204);
  CHECK(h.call(V::get, "/v1/ports/" + port_id, h.admin()).status == 404);
  CHECK(h.call(V::delete_, "/v1/ports/" + port_id, h.admin()).status == 404);
  CHECK(h.call(V::get, "/v1/nodes/pt1", h.admin()).json["ports"].empty());
}
