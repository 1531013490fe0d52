// /v1/tenants and the tenant side of /v1/tokens and /v1/images, through
// Api::handle() on a real SQLite store (api_harness.h).
#include <catch2/catch.hpp>

#include <string>

#include "controller/api/profile_input.h"
#include "tests/unit/api/api_harness.h"
#include "tests/unit/api/tenant_fixtures.h"

using namespace kiln;
using namespace kiln::test;
using json = nlohmann::json;
using V = http::bhttp::verb;

namespace {

json acme_body() {
  return {{"name", "acme"},
          {"display_name", "Acme Research"},
          {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"max_nodes", 2}},
                                  {{"profile", "h100-vm-1x"}, {"kind", "virtual"}, {"max_nodes", 4}}})}};
}

const json* quota_of(const json& tenant, const std::string& profile, const std::string& kind) {
  for (const json& q : tenant["quotas"])
    if (q["profile"] == profile && q["kind"] == kind) return &q;
  return nullptr;
}

}  // namespace

TEST_CASE("tenants: an admin creates one with quotas, and reads show what is in use", "[tenants]") {
  ApiHarness h;
  seed_profiles(h);
  Resp made = h.call_json(V::post, "/v1/tenants", h.admin(), acme_body());
  INFO(made.body);
  REQUIRE(made.status == 201);
  CHECK(made.header("location") == "/v1/tenants/acme");
  CHECK(made.header("etag") == "\"1\"");
  CHECK(made.json["display_name"] == "Acme Research");
  REQUIRE(made.json["quotas"].size() == 2);

  // Two cpu-lab nodes held by acme (one under its quota) and one of a profile
  // it has no quota for: both show, the latter as max_nodes 0.
  h.enroll("n1", {{"profile", "cpu-lab"}, {"tenant", "acme"}});
  h.enroll("n2", {{"profile", "h100-sxm-8x"}, {"tenant", "acme"}});
  h.enroll("n3", {{"profile", "cpu-lab"}});
  Resp got = h.call(V::get, "/v1/tenants/acme", h.admin());
  REQUIRE(got.status == 200);
  const json* lab = quota_of(got.json, "cpu-lab", "baremetal");
  REQUIRE(lab != nullptr);
  CHECK((*lab)["max_nodes"] == 2);
  CHECK((*lab)["in_use"] == 1);
  const json* vm = quota_of(got.json, "h100-vm-1x", "virtual");
  REQUIRE(vm != nullptr);
  CHECK((*vm)["in_use"] == 0);
  const json* unquoted = quota_of(got.json, "h100-sxm-8x", "baremetal");
  REQUIRE(unquoted != nullptr);
  CHECK((*unquoted)["max_nodes"] == 0);
  CHECK((*unquoted)["in_use"] == 1);

  std::string op = h.make_token("operator");
  Resp listed = h.call(V::get, "/v1/tenants", op);
  REQUIRE(listed.status == 200);
  REQUIRE(listed.json["tenants"].size() == 1);
  CHECK(listed.json["tenants"][0]["name"] == "acme");
  const json* listed_lab = quota_of(listed.json["tenants"][0], "cpu-lab", "baremetal");
  REQUIRE(listed_lab != nullptr);
  CHECK((*listed_lab)["in_use"] == 1);
  CHECK(quota_of(listed.json["tenants"][0], "h100-sxm-8x", "baremetal") != nullptr);
}

TEST_CASE("tenants: bad bodies are 400 naming the field, a taken name 409", "[tenants]") {
  ApiHarness h;
  seed_profiles(h);
  auto post = [&](const json& b) { return h.call_json(V::post, "/v1/tenants", h.admin(), b); };
  CHECK(post({{"display_name", "x"}}).has_field("/name"));
  CHECK(post({{"name", "Acme"}}).field() == "/name");
  CHECK(post({{"name", "-acme"}}).field() == "/name");
  CHECK(post({{"name", std::string(64, 'a')}}).field() == "/name");
  CHECK(post({{"name", "acme"}, {"display_name", std::string(256, 'x')}}).field() == "/display_name");
  CHECK(post({{"name", "acme"}, {"owner", "bob"}}).field() == "/owner");
  CHECK(post({{"name", "acme"}, {"quotas", "lots"}}).field() == "/quotas");
  CHECK(post({{"name", "acme"}, {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "metal"}, {"max_nodes", 1}}})}})
            .field() == "/quotas/0/kind");
  CHECK(post({{"name", "acme"}, {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "virtual"}, {"max_nodes", -1}}})}})
            .field() == "/quotas/0/max_nodes");
  CHECK(post({{"name", "acme"}, {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "virtual"}}})}})
            .has_field("/quotas/0/max_nodes", "is required"));
  Resp dup = post({{"name", "acme"},
                   {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "virtual"}, {"max_nodes", 1}},
                                           {{"profile", "cpu-lab"}, {"kind", "virtual"}, {"max_nodes", 2}}})}});
  CHECK(dup.status == 400);
  CHECK(dup.field() == "/quotas/1");
  Resp typo = post({{"name", "acme"}, {"quotas", json::array({{{"profile", "cpu-lba"}, {"kind", "baremetal"}, {"max_nodes", 1}}})}});
  CHECK(typo.status == 400);
  CHECK(typo.field() == "/quotas/0/profile");
  CHECK(h.call(V::get, "/v1/tenants/acme", h.admin()).status == 404);  // nothing was created

  REQUIRE(post({{"name", "acme"}}).status == 201);
  Resp again = post({{"name", "acme"}});
  CHECK(again.status == 409);
  CHECK(again.field() == "/name");
}

TEST_CASE("tenants: a tenant reads its own tenant only, and another is a 404 like a missing one", "[tenants]") {
  ApiHarness h;
  seed_profiles(h);
  REQUIRE(h.call_json(V::post, "/v1/tenants", h.admin(), acme_body()).status == 201);
  std::string acme = h.make_token("tenant", "acme", "acme");
  std::string globex = h.make_token("tenant", "globex", "globex");

  CHECK(h.call(V::get, "/v1/tenants/acme", acme).status == 200);
  Resp other = h.call(V::get, "/v1/tenants/acme", globex);
  Resp missing = h.call(V::get, "/v1/tenants/nosuch", globex);
  CHECK(other.status == 404);
  CHECK(missing.status == 404);
  CHECK(other.json["detail"].get<std::string>().find("acme") != std::string::npos);  // names what was asked
  CHECK(other.json["title"] == missing.json["title"]);

  Resp mine = h.call(V::get, "/v1/tenants", globex);
  REQUIRE(mine.status == 200);
  REQUIRE(mine.json["tenants"].size() == 1);
  CHECK(mine.json["tenants"][0]["name"] == "globex");

  // Writes are the admin's.
  CHECK(h.call_json(V::patch, "/v1/tenants/acme", acme, {{"quotas", nullptr}}).status == 403);
  CHECK(h.call(V::delete_, "/v1/tenants/acme", acme).status == 403);
  CHECK(h.call_json(V::post, "/v1/tenants", acme, {{"name", "mine"}}).status == 403);
  std::string op = h.make_token("operator");
  CHECK(h.call_json(V::post, "/v1/tenants", op, {{"name", "mine"}}).status == 403);
}

TEST_CASE("tenants: PATCH replaces quotas, keeps the name, honours If-Match", "[tenants]") {
  ApiHarness h;
  seed_profiles(h);
  REQUIRE(h.call_json(V::post, "/v1/tenants", h.admin(), acme_body()).status == 201);
  Resp p = h.call_json(V::patch, "/v1/tenants/acme", h.admin(),
                       {{"quotas", json::array({{{"profile", "h100-sxm-8x"}, {"kind", "baremetal"}, {"max_nodes", 8}}})}},
                       {{}, "application/merge-patch+json"});
  INFO(p.body);
  REQUIRE(p.status == 200);
  CHECK(p.json["version"] == 2);
  REQUIRE(p.json["quotas"].size() == 1);
  CHECK(p.json["quotas"][0]["max_nodes"] == 8);
  CHECK(p.json["display_name"] == "Acme Research");

  CHECK(h.call_json(V::patch, "/v1/tenants/acme", h.admin(), {{"name", "other"}}).field() == "/name");
  CHECK(h.call_json(V::patch, "/v1/tenants/acme", h.admin(),
                    {{"quotas", json::array({{{"profile", "nope"}, {"kind", "baremetal"}, {"max_nodes", 1}}})}})
            .field() == "/quotas/0/profile");
  Options stale;
  stale.headers["If-Match"] = "\"1\"";
  CHECK(h.call_json(V::patch, "/v1/tenants/acme", h.admin(), {{"display_name", "x"}}, stale).status == 412);
  Options fresh;
  fresh.headers["If-Match"] = "\"2\"";
  Resp ok = h.call_json(V::patch, "/v1/tenants/acme", h.admin(), {{"display_name", nullptr}, {"quotas", nullptr}}, fresh);
  REQUIRE(ok.status == 200);
  CHECK(ok.json["display_name"] == "");
  CHECK(ok.json["quotas"].empty());
  CHECK(h.call_json(V::patch, "/v1/tenants/nosuch", h.admin(), {{"display_name", "x"}}).status == 404);
}

TEST_CASE("tenants: DELETE is refused while nodes are held, and takes the tenant's tokens", "[tenants]") {
  ApiHarness h;
  seed_profiles(h);
  std::string acme = h.make_token("tenant", "acme", "acme");
  json n = h.enroll("n1", {{"tenant", "acme"}});
  Resp busy = h.call(V::delete_, "/v1/tenants/acme", h.admin());
  CHECK(busy.status == 409);
  CHECK(h.call(V::get, "/v1/nodes", acme).status == 200);

  REQUIRE(h.call_json(V::patch, "/v1/nodes/n1", h.admin(), {{"tenant", nullptr}}, {{}, "application/merge-patch+json"})
              .status == 200);
  CHECK(h.call(V::delete_, "/v1/tenants/acme", h.admin()).status == 204);
  CHECK(h.call(V::get, "/v1/nodes", acme).status == 401);  // its token went with it
  CHECK(h.call(V::delete_, "/v1/tenants/acme", h.admin()).status == 404);

  // Re-creating the name does not bring the old token back.
  REQUIRE(h.call_json(V::post, "/v1/tenants", h.admin(), {{"name", "acme"}}).status == 201);
  CHECK(h.call(V::get, "/v1/nodes", acme).status == 401);
}

TEST_CASE("tokens: a tenant token must name an existing tenant", "[tenants]") {
  ApiHarness h;
  seed_profiles(h);
  Resp r = h.call_json(V::post, "/v1/tokens", h.admin(), {{"name", "bot"}, {"role", "tenant"}, {"tenant", "ghost"}});
  CHECK(r.status == 400);
  CHECK(r.field() == "/tenant");
  Resp list = h.call(V::get, "/v1/tokens", h.admin());
  for (const json& t : list.json["tokens"]) CHECK(t["tenant"] != "ghost");
}

TEST_CASE("tenants: no token is 401 on every route, and hostile bodies are 400 without a tenant", "[tenants]") {
  ApiHarness h;
  seed_profiles(h);
  CHECK(h.call(V::get, "/v1/tenants", "").status == 401);
  CHECK(h.call(V::get, "/v1/tenants/acme", "").status == 401);
  CHECK(h.call_json(V::post, "/v1/tenants", "", {{"name", "acme"}}).status == 401);
  CHECK(h.call_json(V::patch, "/v1/tenants/acme", "", {{"display_name", "x"}}).status == 401);
  CHECK(h.call(V::delete_, "/v1/tenants/acme", "").status == 401);

  // 10,000 levels deep inside a quota: refused by the bounded parser, naming where.
  std::string deep = R"({"name":"acme","quotas":[)" + std::string(10000, '[') + std::string(10000, ']') + "]}";
  Resp d = h.call(V::post, "/v1/tenants", h.admin(), deep);
  CHECK(d.status == 400);
  CHECK(d.field().rfind("/quotas/0", 0) == 0);
  // Invalid UTF-8 in a string is 400, never stored.
  Resp u = h.call(V::post, "/v1/tenants", h.admin(), std::string(R"({"name":"acme","display_name":"\xff\xfe"})"));
  CHECK(u.status == 400);
  CHECK(h.call(V::get, "/v1/tenants/acme", h.admin()).status == 404);
}
