// Authentication, roles, tenant isolation and token management.
#include <catch2/catch.hpp>

#include <set>

#include "common/crypto.h"
#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;
using V = http::bhttp::verb;

TEST_CASE("missing, malformed or unknown tokens are 401 with WWW-Authenticate") {
  ApiHarness h;
  Resp none = h.call(V::get, "/v1/nodes", "");
  CHECK(none.status == 401);
  CHECK(none.header("www-authenticate").rfind("Bearer", 0) == 0);
  CHECK(none.header("content-type") == "application/problem+json");
  CHECK(none.json["status"] == 401);
  Resp unknown = h.call(V::get, "/v1/nodes", "kiln_000000000000000000000000000000000000000000000000");
  CHECK(unknown.status == 401);
  CHECK(unknown.header("www-authenticate").rfind("Bearer", 0) == 0);
  Options basic;
  basic.headers["Authorization"] = "Basic YWRtaW46YWRtaW4=";
  CHECK(h.call(V::get, "/v1/nodes", "", "", basic).status == 401);
  // Unauthenticated mutations are refused before any body is looked at.
  CHECK(h.call(V::post, "/v1/nodes", "", "{not json").status == 401);
  // The meta endpoints need no token.
  CHECK(h.call(V::get, "/healthz", "").status == 200);
}

TEST_CASE("tokens: create shows the secret once, list hides it, delete revokes at once") {
  ApiHarness h;
  Resp c = h.call_json(V::post, "/v1/tokens", h.admin(), {{"name", "ci"}, {"role", "operator"}});
  INFO(c.body);
  REQUIRE(c.status == 201);
  std::string secret = c.json["token"];
  CHECK(secret.rfind("kiln_", 0) == 0);
  CHECK(secret.size() == 5 + 48);
  CHECK(c.json["role"] == "operator");
  CHECK(c.json["name"] == "ci");
  CHECK(c.json["tenant"].is_null());
  CHECK(c.json.contains("created_at"));
  std::string id = c.json["id"];

  // Stored only as its hash.
  auto rec = h.store().find_token_by_hash(sha256_hex(secret));
  REQUIRE(rec);
  CHECK(rec->id == id);

  Resp list = h.call(V::get, "/v1/tokens", h.admin());
  REQUIRE(list.status == 200);
  CHECK(list.json["tokens"].size() == 2);  // bootstrap admin + ci
  CHECK(list.body.find(secret) == std::string::npos);
  CHECK(list.body.find(sha256_hex(secret)) == std::string::npos);
  for (const auto& t : list.json["tokens"]) CHECK_FALSE(t.contains("token"));

  CHECK(h.call(V::get, "/v1/nodes", secret).status == 200);
  CHECK(h.call(V::delete_, "/v1/tokens/" + id, h.admin()).status == 204);
  Resp revoked = h.call(V::get, "/v1/nodes", secret);
  CHECK(revoked.status == 401);
  CHECK(h.call(V::delete_, "/v1/tokens/" + id, h.admin()).status == 404);

  auto post = [&](const json& b) { return h.call_json(V::post, "/v1/tokens", h.admin(), b); };
  CHECK(post({{"name", "x"}, {"role", "root"}}).field() == "/role");
  CHECK(post({{"name", "x"}, {"role", "tenant"}}).field() == "/tenant");
  CHECK(post({{"name", "x"}, {"role", "operator"}, {"tenant", "acme"}}).field() == "/tenant");
  CHECK(post({{"role", "admin"}}).has_field("/name", "required"));
  CHECK(post({{"name", ""}, {"role", "admin"}}).field() == "/name");
  CHECK(post({{"name", "x"}, {"role", "admin"}, {"scope", "all"}}).field() == "/scope");
  Resp missing = post({{"name", "acme-bot"}, {"role", "tenant"}, {"tenant", "acme"}});
  CHECK(missing.status == 400);
  CHECK(missing.has_field("/tenant"));
  REQUIRE(h.call_json(V::post, "/v1/tenants", h.admin(), {{"name", "acme"}}).status == 201);
  Resp t = post({{"name", "acme-bot"}, {"role", "tenant"}, {"tenant", "acme"}});
  REQUIRE(t.status == 201);
  CHECK(t.json["tenant"] == "acme");
}

TEST_CASE("bootstrap admin token is created once") {
  ApiHarness h;
  CHECK(h.call(V::get, "/v1/tokens", h.admin()).status == 200);
  FakeClock clock;
  // An admin exists: a second bootstrap with another secret creates nothing.
  REQUIRE(bootstrap_admin_token(h.store(), "another-secret-long-enough", clock));
  CHECK(h.call(V::get, "/v1/nodes", "another-secret-long-enough").status == 401);
  CHECK_FALSE(bootstrap_admin_token(h.store(), "short", clock));
}

TEST_CASE("roles: operator cannot manage tokens or read audit, tenant is confined") {
  ApiHarness h;
  std::string op = h.make_token("operator");
  std::string ten = h.make_token("tenant", "acme");

  CHECK(h.call(V::get, "/v1/tokens", op).status == 403);
  CHECK(h.call_json(V::post, "/v1/tokens", op, {{"name", "x"}, {"role", "admin"}}).status == 403);
  CHECK(h.call(V::get, "/v1/audit", op).status == 403);
  Resp forbidden = h.call(V::get, "/v1/audit", ten);
  CHECK(forbidden.status == 403);
  CHECK(forbidden.header("content-type") == "application/problem+json");

  // Operators run the fleet.
  Resp created = h.call_json(V::post, "/v1/nodes", op, {{"name", "op-node"}, {"bmc", {{"driver", "fake"}, {"address", "a"}}}});
  CHECK(created.status == 201);
  CHECK(h.call_json(V::patch, "/v1/nodes/op-node", op, {{"profile", "x"}}).status == 200);
  CHECK(h.call(V::put, "/v1/nodes/op-node/maintenance", op, "").status == 200);
  CHECK(h.call(V::get, "/v1/events", op).status == 200);
  CHECK(h.call(V::get, "/v1/ports", op).status == 200);

  // Tenants cannot enroll, list ports or create ports.
  CHECK(h.call_json(V::post, "/v1/nodes", ten, {{"bmc", {{"driver", "fake"}, {"address", "a"}}}}).status == 403);
  CHECK(h.call(V::get, "/v1/ports", ten).status == 403);
  CHECK(h.call_json(V::post, "/v1/ports", ten, {{"node", "op-node"}, {"address", mac(1)}}).status == 403);
}

TEST_CASE("whoami names the caller's own token and role, never a secret") {
  ApiHarness h;
  std::string op = h.make_token("operator", "", "night-shift");
  std::string ten = h.make_token("tenant", "acme", "acme-ci");

  Resp admin = h.call(V::get, "/v1/whoami", h.admin());
  REQUIRE(admin.status == 200);
  CHECK(admin.json["role"] == "admin");
  CHECK(admin.json["tenant"].is_null());
  Resp o = h.call(V::get, "/v1/whoami", op);
  CHECK(o.json["role"] == "operator");
  CHECK(o.json["name"] == "night-shift");
  Resp t = h.call(V::get, "/v1/whoami", ten);
  CHECK(t.json["role"] == "tenant");
  CHECK(t.json["tenant"] == "acme");
  CHECK(t.json["name"] == "acme-ci");
  CHECK(t.json["token"].is_string());
  CHECK(t.body.find(ten) == std::string::npos);  // the secret is write-only
  CHECK(h.call(V::get, "/v1/whoami", "").status == 401);
  CHECK(h.call(V::get, "/v1/whoami", "kiln_no_such_token_0000000000000000").status == 401);
}

TEST_CASE("tenant isolation: own nodes only, others' nodes are 404 as if absent") {
  ApiHarness h;
  std::string acme = h.make_token("tenant", "acme", "acme");
  std::string globex = h.make_token("tenant", "globex", "globex");
  json mine = h.enroll("acme-1", {{"tenant", "acme"}, {"ports", {{{"address", mac(1)}}}}});
  json theirs = h.enroll("globex-1", {{"tenant", "globex"}});
  json unowned = h.enroll("free-1");

  // Listing: only its own, whatever it asks.
  Resp list = h.call(V::get, "/v1/nodes", acme);
  REQUIRE(list.status == 200);
  REQUIRE(list.json["nodes"].size() == 1);
  CHECK(list.json["nodes"][0]["name"] == "acme-1");
  CHECK(h.call(V::get, "/v1/nodes?tenant=globex", acme).json["nodes"].empty());

  // The tenant view: enough to use the machine, nothing about how it is driven.
  Resp own = h.call(V::get, "/v1/nodes/acme-1", acme);
  REQUIRE(own.status == 200);
  for (const char* hidden : {"bmc", "reservation", "conductor", "maintenance_reason", "provision_step", "fault", "last_error"})
    CHECK_FALSE(own.json.contains(hidden));
  for (const char* shown : {"id", "name", "ports", "provision_state", "power_state", "tenant", "version"})
    CHECK(own.json.contains(shown));
  CHECK(own.body.find("bmc-acme-1") == std::string::npos);
  CHECK(h.call(V::get, "/v1/nodes?fields=bmc", acme).field() == "fields");

  // Someone else's node, or one nobody holds: 404 for every verb.
  for (const std::string& other : {std::string("globex-1"), theirs["id"].get<std::string>(), std::string("free-1")}) {
    INFO(other);
    CHECK(h.call(V::get, "/v1/nodes/" + other, acme).status == 404);
    CHECK(h.call(V::get, "/v1/nodes/" + other + "/inventory", acme).status == 404);
    CHECK(h.call_json(V::patch, "/v1/nodes/" + other, acme, {{"profile", "x"}}).status == 404);
    CHECK(h.call(V::delete_, "/v1/nodes/" + other, acme).status == 404);
    CHECK(h.call_json(V::put, "/v1/nodes/" + other + "/states/power", acme, {{"target", "on"}}).status == 404);
    CHECK(h.call_json(V::put, "/v1/nodes/" + other + "/states/provision", acme, {{"target", "manage"}}).status == 404);
    CHECK(h.call(V::put, "/v1/nodes/" + other + "/maintenance", acme, "").status == 404);
    CHECK(h.call(V::get, "/v1/events?node=" + other, acme).status == 404);
  }
  // Own node: power yes, everything operator-only is 403.
  CHECK(h.call_json(V::put, "/v1/nodes/acme-1/states/power", acme, {{"target", "on"}}).status == 202);
  CHECK(h.call_json(V::patch, "/v1/nodes/acme-1", acme, {{"profile", "x"}}).status == 403);
  CHECK(h.call_json(V::put, "/v1/nodes/acme-1/states/provision", acme, {{"target", "manage"}}).status == 403);
  CHECK(h.call(V::delete_, "/v1/nodes/acme-1", acme).status == 403);
  CHECK(h.call(V::put, "/v1/nodes/acme-1/maintenance", acme, "").status == 403);

  // Events: only its own nodes'.
  Resp ev = h.call(V::get, "/v1/events", acme);
  REQUIRE(ev.status == 200);
  REQUIRE_FALSE(ev.json["events"].empty());
  for (const auto& e : ev.json["events"]) CHECK(e["node"] == mine["id"]);
  Resp ev2 = h.call(V::get, "/v1/events", globex);
  for (const auto& e : ev2.json["events"]) CHECK(e["node"] == theirs["id"]);
  (void)unowned;
}
