// GET /v1/conductors and the node view's `conductor`: the registrations as
// the answering instance sees them, which one is answering, how many nodes
// the ring gives each; staff only.
#include <catch2/catch.hpp>

#include "controller/conductor/membership.h"
#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using V = http::bhttp::verb;

TEST_CASE("conductors: the list shows this instance alive and answering, owning every node - staff only") {
  ApiHarness h;
  nlohmann::json n1 = h.enroll("c1");
  nlohmann::json n2 = h.enroll("c2");
  // A conductor that stopped earlier (another host): listed, not alive, no nodes.
  REQUIRE(h.store().register_conductor({"old-one", "host-old", "http://host-old:8080", 0, 0, 0}));
  REQUIRE(h.store().stop_conductor("old-one"));
  h.sync(h.membership().refresh());

  Resp r = h.call(V::get, "/v1/conductors", h.admin());
  REQUIRE(r.status == 200);
  CHECK(r.json["next"].is_null());
  REQUIRE(r.json["conductors"].size() == 2);
  nlohmann::json self, old;
  for (const auto& c : r.json["conductors"]) (c["id"] == "old-one" ? old : self) = c;
  CHECK(self["id"] == h.membership().id());
  CHECK(self["host"] == "api-test");
  CHECK(self["api_url"] == "http://kiln.test:8080");
  CHECK(self["alive"] == true);
  CHECK(self["self"] == true);
  CHECK(self["nodes"] == 2);
  CHECK(self["stopped_at"].is_null());
  CHECK(self["started_at"].get<std::string>().back() == 'Z');
  CHECK(self["last_heartbeat_at"].is_string());
  CHECK(old["alive"] == false);
  CHECK(old["self"] == false);
  CHECK(old["nodes"] == 0);
  CHECK(old["host"] == "host-old");
  CHECK(old["stopped_at"].is_string());

  // The node view names the owner (staff); tenants do not see it.
  Resp one = h.call(V::get, "/v1/nodes/" + n1["id"].get<std::string>(), h.admin());
  REQUIRE(one.status == 200);
  CHECK(one.json["conductor"] == h.membership().id());
  Resp list = h.call(V::get, "/v1/nodes", h.admin());
  REQUIRE(list.status == 200);
  for (const auto& n : list.json["nodes"]) CHECK(n["conductor"] == h.membership().id());
  Resp picked = h.call(V::get, "/v1/nodes/" + n2["id"].get<std::string>() + "?fields=conductor", h.admin());
  REQUIRE(picked.status == 200);
  CHECK(picked.json["conductor"] == h.membership().id());

  CHECK(h.call(V::get, "/v1/conductors", h.make_token("operator")).status == 200);
  REQUIRE(h.call_json(V::post, "/v1/tenants", h.admin(), {{"name", "acme"}}).status == 201);
  std::string tenant = h.make_token("tenant", "acme");
  CHECK(h.call(V::get, "/v1/conductors", tenant).status == 403);
  CHECK(h.call(V::get, "/v1/conductors", "").status == 401);
}
