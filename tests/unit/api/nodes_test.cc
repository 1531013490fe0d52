// /v1/nodes: enrollment, validation errors, lists, merge patch, deletion,
// and the BMC password's life (sealed at rest, never shown, never logged).
#include <catch2/catch.hpp>

#include <set>

#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;
using V = http::bhttp::verb;

namespace {

json fake_bmc(const std::string& address = "bmc-1") {
  return {{"driver", "fake"}, {"address", address}};
}

int64_t node_count(ApiHarness& h) {
  auto r = h.store().count_nodes_by_state();
  REQUIRE(r);
  int64_t n = 0;
  for (const auto& [s, c] : *r) n += c;
  return n;
}

}  // namespace

TEST_CASE("create node: 201 with Location, ETag and every field of the node model") {
  ApiHarness h;
  json body = {{"name", "gpu-01"},
               {"kind", "baremetal"},
               {"bmc", {{"driver", "fake"}, {"address", "10.0.0.5"}, {"username", "root"},
                        {"password", "s3cret-Pa55"}, {"system_id", "1"}, {"verify_tls", false},
                        {"options", {{"power_delay_ms", 1}}}}},
               {"ports", {{{"address", "52:54:00:AA:BB:01"}}, {{"address", "52-54-00-aa-bb-02"}, {"pxe", false}}}},
               {"boot_mode", "bios"},
               {"profile", "h100x8"},
               {"traits", {"CUSTOM_NVLINK"}}};
  Resp r = h.call_json(V::post, "/v1/nodes", h.admin(), body);
  INFO(r.body);
  REQUIRE(r.status == 201);
  CHECK(r.header("content-type") == "application/json");
  const json& n = r.json;
  CHECK(r.header("location") == "/v1/nodes/" + n["id"].get<std::string>());
  CHECK(r.header("etag") == "\"" + std::to_string(n["version"].get<int64_t>()) + "\"");
  for (const char* f : {"id", "name", "kind", "bmc", "ports", "boot_mode", "profile", "traits",
                        "provision_state", "target_provision_state", "provision_step", "power_state",
                        "target_power_state", "maintenance", "maintenance_reason", "fault", "last_error",
                        "tenant", "allocation", "inventory", "last_validation", "reservation",
                        "created_at", "updated_at", "version"})
    CHECK(n.contains(f));
  CHECK(n["name"] == "gpu-01");
  CHECK(n["provision_state"] == "enroll");
  CHECK(n["boot_mode"] == "bios");
  CHECK(n["bmc"]["password_set"] == true);
  CHECK_FALSE(n["bmc"].contains("password"));
  CHECK(n["bmc"]["verify_tls"] == false);
  CHECK(n["bmc"]["options"]["power_delay_ms"] == 1);
  REQUIRE(n["ports"].size() == 2);
  std::set<std::string> macs = {n["ports"][0]["address"], n["ports"][1]["address"]};
  CHECK(macs == std::set<std::string>{"52:54:00:aa:bb:01", "52:54:00:aa:bb:02"});
  CHECK(n["tenant"].is_null());
  CHECK(n["created_at"].get<std::string>().back() == 'Z');
  CHECK(r.body.find("s3cret-Pa55") == std::string::npos);

  // By name and by id.
  Resp by_name = h.call(V::get, "/v1/nodes/gpu-01", h.admin());
  REQUIRE(by_name.status == 200);
  CHECK(by_name.json["id"] == n["id"]);
  CHECK(by_name.header("etag") == r.header("etag"));
  CHECK(h.call(V::get, "/v1/nodes/" + n["id"].get<std::string>(), h.admin()).status == 200);
}

TEST_CASE("BMC password is sealed at rest, never returned and never logged") {
  ApiHarness h;
  const std::string pw = "Sup3r-Secret-Passw0rd";
  json body = {{"name", "n1"}, {"bmc", {{"driver", "fake"}, {"address", "a"}, {"password", pw}}}};
  Resp r = h.call_json(V::post, "/v1/nodes", h.admin(), body);
  REQUIRE(r.status == 201);
  std::string id = r.json["id"];

  auto stored = h.store().get_node(id);
  REQUIRE(stored);
  CHECK(stored->bmc.password_sealed != pw);
  CHECK(stored->bmc.password_sealed.find(pw) == std::string::npos);
  auto opened = h.secrets().open(stored->bmc.password_sealed);
  REQUIRE(opened);
  CHECK(*opened == pw);

  // Change it by PATCH; then clear it; also fail a request that carries it.
  const std::string pw2 = "An0ther-Secret-Value";
  Resp p = h.call_json(V::patch, "/v1/nodes/n1", h.admin(), {{"bmc", {{"password", pw2}}}});
  REQUIRE(p.status == 200);
  CHECK(p.json["bmc"]["password_set"] == true);
  auto after = h.store().get_node(id);
  CHECK(*h.secrets().open(after->bmc.password_sealed) == pw2);
  Resp bad = h.call(V::post, "/v1/nodes", h.admin(), R"({"bmc": {"password": ")" + pw + R"(", )");
  CHECK(bad.status == 400);
  Resp bad2 = h.call_json(V::post, "/v1/nodes", h.admin(),
                          {{"bmc", {{"driver", "fake"}, {"address", "a"}, {"password", pw}, {"colour", 1}}}});
  CHECK(bad2.status == 400);
  Resp cleared = h.call_json(V::patch, "/v1/nodes/n1", h.admin(), {{"bmc", {{"password", nullptr}}}});
  REQUIRE(cleared.status == 200);
  CHECK(cleared.json["bmc"]["password_set"] == false);

  // Every response so far, lists and events included, and every log line.
  std::vector<std::string> bodies = {r.body, p.body, bad.body, bad2.body, cleared.body,
                                     h.call(V::get, "/v1/nodes", h.admin()).body,
                                     h.call(V::get, "/v1/nodes/n1", h.admin()).body,
                                     h.call(V::get, "/v1/events", h.admin()).body,
                                     h.call(V::get, "/v1/audit", h.admin()).body};
  for (const std::string& b : bodies) {
    CHECK(b.find(pw) == std::string::npos);
    CHECK(b.find(pw2) == std::string::npos);
  }
  std::string logs = h.log().all();
  CHECK_FALSE(logs.empty());
  CHECK(logs.find(pw) == std::string::npos);
  CHECK(logs.find(pw2) == std::string::npos);
  CHECK(logs.find(ApiHarness::kAdminSecret) == std::string::npos);
}

TEST_CASE("create node: every kind of bad input is a problem+json naming the field") {
  ApiHarness h;
  auto post = [&](const std::string& body, const std::string& ct = "application/json") {
    Options o;
    o.content_type = ct;
    return h.call(V::post, "/v1/nodes", h.admin(), body, o);
  };
  auto post_json = [&](const json& body) { return h.call_json(V::post, "/v1/nodes", h.admin(), body); };

  SECTION("malformed JSON: 400 with field \"\"") {
    Resp r = post("{\"name\": ");
    CHECK(r.status == 400);
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(r.json["status"] == 400);
    CHECK(r.json["title"] == "Bad Request");
    CHECK(r.json.contains("type"));
    CHECK(r.json.contains("detail"));
    CHECK(r.has_field(""));
  }
  SECTION("wrong Content-Type: 415") {
    Resp r = post(json({{"bmc", fake_bmc()}}).dump(), "text/plain");
    CHECK(r.status == 415);
    CHECK(r.json["status"] == 415);
  }
  SECTION("unknown fields, top-level and nested") {
    Resp r = post_json({{"bmc", {{"driver", "fake"}, {"address", "a"}, {"colour", "red"}}}, {"size", 1}});
    CHECK(r.status == 400);
    CHECK(r.has_field("/bmc/colour", "unknown field"));
    CHECK(r.has_field("/size", "unknown field"));
  }
  SECTION("wrong types") {
    Resp r = post_json({{"bmc", fake_bmc()}, {"traits", {"a", 5}}, {"name", 3}});
    CHECK(r.status == 400);
    CHECK(r.has_field("/traits/1", "must be a string"));
    CHECK(r.has_field("/name", "must be a string"));
    CHECK(post_json(json::array()).has_field("", "must be an object"));
  }
  SECTION("invalid MAC") {
    Resp r = post_json({{"bmc", fake_bmc()}, {"ports", {{{"address", "52:54:00:zz:00:01"}}}}});
    CHECK(r.status == 400);
    CHECK(r.field() == "/ports/0/address");
  }
  SECTION("bad names: charset, length, UUID") {
    CHECK(post_json({{"bmc", fake_bmc()}, {"name", "a b"}}).field() == "/name");
    CHECK(post_json({{"bmc", fake_bmc()}, {"name", std::string(256, 'x')}}).field() == "/name");
    CHECK(post_json({{"bmc", fake_bmc()}, {"name", "123e4567-e89b-12d3-a456-426614174000"}}).field() ==
          "/name");
  }
  SECTION("enums and required fields") {
    CHECK(post_json({{"bmc", fake_bmc()}, {"kind", "vm"}}).field() == "/kind");
    CHECK(post_json({{"bmc", fake_bmc()}, {"boot_mode", "efi"}}).field() == "/boot_mode");
    CHECK(post_json({{"name", "x"}}).field() == "/bmc");
    CHECK(post_json({{"bmc", {{"driver", "fake"}}}}).field() == "/bmc/address");
  }
  SECTION("the conductor validates the BMC block") {
    Resp r = post_json({{"bmc", {{"driver", "floppy"}, {"address", "a"}}}});
    CHECK(r.status == 400);
    CHECK(r.field() == "/bmc/driver");
    Resp r2 = post_json({{"bmc", {{"driver", "fake"}, {"address", "a"}, {"options", {{"power_delay_ms", "x"}}}}}});
    CHECK(r2.status == 400);
  }
  CHECK(node_count(h) == 0);
}

TEST_CASE("duplicate name or MAC: 409 naming the field, nothing half-written") {
  ApiHarness h;
  h.enroll("dup", {{"ports", {{{"address", mac(1)}}}}});
  auto events_before = h.store().last_event_seq();
  REQUIRE(events_before);

  Resp by_name = h.call_json(V::post, "/v1/nodes", h.admin(), {{"name", "dup"}, {"bmc", fake_bmc()}});
  CHECK(by_name.status == 409);
  CHECK(by_name.field() == "/name");

  Resp by_mac = h.call_json(V::post, "/v1/nodes", h.admin(),
                            {{"name", "other"}, {"bmc", fake_bmc()},
                             {"ports", {{{"address", mac(2)}}, {{"address", mac(1)}}}}});
  CHECK(by_mac.status == 409);
  CHECK(by_mac.field() == "/ports/1/address");
  CHECK(h.call(V::get, "/v1/nodes/other", h.admin()).status == 404);
  CHECK(h.store().find_port_by_address(mac(2)).error().code == Code::kNotFound);

  Resp same_body = h.call_json(V::post, "/v1/nodes", h.admin(),
                               {{"bmc", fake_bmc()}, {"ports", {{{"address", mac(3)}}, {{"address", mac(3)}}}}});
  CHECK(same_body.status == 400);
  CHECK(same_body.field() == "/ports/1/address");
  CHECK(node_count(h) == 1);
  CHECK(*h.store().last_event_seq() == *events_before);
}

TEST_CASE("unknown node, unknown route and wrong method") {
  ApiHarness h;
  Resp r = h.call(V::get, "/v1/nodes/nope", h.admin());
  CHECK(r.status == 404);
  CHECK(r.header("content-type") == "application/problem+json");
  CHECK(h.call(V::get, "/v1/nodes/123e4567-e89b-42d3-a456-426614174000", h.admin()).status == 404);

  Resp route = h.call(V::get, "/v1/gadgets", h.admin());
  CHECK(route.status == 404);
  CHECK(route.json["status"] == 404);

  Resp method = h.call(V::put, "/v1/nodes", h.admin(), "{}");
  CHECK(method.status == 405);
  CHECK(method.header("allow") == "POST, GET");
  CHECK(method.json["status"] == 405);
  CHECK(h.call(V::post, "/v1/nodes/x/inventory", h.admin()).header("allow") == "GET");
}

TEST_CASE("list nodes: pages walk the whole set with absolute next links") {
  ApiHarness h;
  std::set<std::string> ids;
  for (int i = 0; i < 7; ++i) ids.insert(h.enroll("node-" + std::to_string(i))["id"]);

  std::set<std::string> seen;
  std::string target = "/v1/nodes?limit=3";
  int pages = 0;
  while (true) {
    Resp r = h.call(V::get, target, h.admin());
    INFO(r.body);
    REQUIRE(r.status == 200);
    ++pages;
    for (const auto& n : r.json["nodes"]) {
      CHECK(seen.insert(n["id"]).second);
      CHECK_FALSE(n.contains("inventory"));
    }
    if (r.json["next"].is_null()) break;
    std::string next = r.json["next"];
    REQUIRE(next.rfind("http://kiln.test:8080/v1/nodes?", 0) == 0);
    CHECK(next.find("limit=3") != std::string::npos);
    target = next.substr(std::string("http://kiln.test:8080").size());
    REQUIRE(pages < 10);
  }
  CHECK(pages == 3);
  CHECK(seen == ids);

  // Descending by name.
  Resp desc = h.call(V::get, "/v1/nodes?sort=-name&limit=2", h.admin());
  REQUIRE(desc.status == 200);
  CHECK(desc.json["nodes"][0]["name"] == "node-6");
  CHECK(desc.json["nodes"][1]["name"] == "node-5");
  Resp asc = h.call(V::get, "/v1/nodes?sort=name", h.admin());
  CHECK(asc.json["nodes"][0]["name"] == "node-0");
  CHECK(asc.json["next"].is_null());
}

TEST_CASE("list nodes: filters, fields and query errors") {
  ApiHarness h;
  h.enroll("a", {{"profile", "h100"}, {"kind", "virtual"}});
  h.enroll("b", {{"profile", "a100"}, {"tenant", "acme"}});
  h.enroll("c", {{"profile", "h100"}});
  REQUIRE(h.call(V::put, "/v1/nodes/c/maintenance", h.admin(), "").status == 200);

  auto names = [&](const std::string& q) {
    Resp r = h.call(V::get, "/v1/nodes" + q, h.admin());
    INFO(r.body);
    REQUIRE(r.status == 200);
    std::set<std::string> out;
    for (const auto& n : r.json["nodes"]) out.insert(n["name"]);
    return out;
  };
  CHECK(names("?profile=h100") == std::set<std::string>{"a", "c"});
  CHECK(names("?kind=virtual") == std::set<std::string>{"a"});
  CHECK(names("?tenant=acme") == std::set<std::string>{"b"});
  CHECK(names("?maintenance=true") == std::set<std::string>{"c"});
  CHECK(names("?maintenance=false&profile=h100") == std::set<std::string>{"a"});
  CHECK(names("?provision_state=enroll").size() == 3);
  CHECK(names("?provision_state=active").empty());

  Resp f = h.call(V::get, "/v1/nodes?fields=name,provision_state", h.admin());
  REQUIRE(f.status == 200);
  for (const auto& n : f.json["nodes"]) {
    CHECK(n.size() == 3);
    CHECK(n.contains("id"));
    CHECK(n.contains("name"));
    CHECK(n.contains("provision_state"));
  }
  Resp one = h.call(V::get, "/v1/nodes/a?fields=profile", h.admin());
  CHECK(one.json == json({{"id", one.json["id"]}, {"profile", "h100"}}));

  auto err = [&](const std::string& q) { return h.call(V::get, "/v1/nodes" + q, h.admin()); };
  CHECK(err("?fields=name,colour").field() == "fields");
  CHECK(err("?fields=inventory").field() == "fields");
  CHECK(err("?colour=red").field() == "colour");
  CHECK(err("?colour=red").status == 400);
  CHECK(err("?limit=0").field() == "limit");
  CHECK(err("?limit=1001").field() == "limit");
  CHECK(err("?limit=ten").field() == "limit");
  CHECK(err("?sort=size").field() == "sort");
  CHECK(err("?provision_state=flying").field() == "provision_state");
  CHECK(err("?maintenance=yes").field() == "maintenance");
  CHECK(err("?kind=vm").field() == "kind");
  CHECK(err("?marker=123e4567-e89b-42d3-a456-426614174000").field() == "marker");
  CHECK(err("?limit=1000").status == 200);
}

TEST_CASE("PATCH applies a JSON merge patch to the mutable fields") {
  ApiHarness h;
  json n = h.enroll("p1", {{"traits", {"A", "B"}}, {"profile", "h100"},
                           {"bmc", {{"driver", "fake"}, {"address", "old"}, {"username", "u"},
                                    {"options", {{"power_delay_ms", 1}, {"step_delay_ms", 2}}}}}});
  Options mp;
  mp.content_type = "application/merge-patch+json";
  Resp r = h.call_json(V::patch, "/v1/nodes/p1", h.admin(),
                       {{"name", "p1-renamed"},
                        {"traits", {"C"}},
                        {"profile", nullptr},
                        {"bmc", {{"address", "new"}, {"options", {{"step_delay_ms", nullptr}}}}}},
                       mp);
  INFO(r.body);
  REQUIRE(r.status == 200);
  CHECK(r.json["name"] == "p1-renamed");
  CHECK(r.json["traits"] == json::array({"C"}));
  CHECK(r.json["profile"].is_null());
  CHECK(r.json["bmc"]["address"] == "new");
  CHECK(r.json["bmc"]["username"] == "u");
  CHECK(r.json["bmc"]["options"] == json({{"power_delay_ms", 1}}));
  CHECK(r.json["version"].get<int64_t>() == n["version"].get<int64_t>() + 1);
  CHECK(r.header("etag") == "\"" + std::to_string(r.json["version"].get<int64_t>()) + "\"");
  CHECK(h.call(V::get, "/v1/nodes/p1", h.admin()).status == 404);
  CHECK(h.call(V::get, "/v1/nodes/p1-renamed", h.admin()).status == 200);

  // The update wrote an event naming the fields.
  auto events = h.store().list_events(0, 100, n["id"].get<std::string>(), std::nullopt);
  REQUIRE(events);
  CHECK(events->back().type == "node.updated");
  CHECK(events->back().detail["fields"].size() == 4);
}

TEST_CASE("PATCH errors: read-only, unknown, invalid result, If-Match, media type, busy") {
  ApiHarness h;
  json n = h.enroll("q1", {{"bmc", {{"driver", "fake"}, {"address", "a"}, {"options", {{"step_delay_ms", 400}}}}}});
  h.enroll("q2");
  std::string id = n["id"];
  auto patch = [&](const json& body, Options o = {}) {
    return h.call_json(V::patch, "/v1/nodes/" + id, h.admin(), body, o);
  };

  Resp ro = patch({{"provision_state", "active"}, {"version", 9}});
  CHECK(ro.status == 400);
  CHECK(ro.has_field("/provision_state", "read-only"));
  CHECK(ro.has_field("/version", "read-only"));
  CHECK(patch({{"bmc", {{"password_set", true}}}}).has_field("/bmc/password_set", "read-only"));
  CHECK(patch({{"bmc", {{"colour", "red"}}}}).has_field("/bmc/colour", "unknown field"));
  CHECK(patch({{"flavour", 1}}).has_field("/flavour", "unknown field"));
  CHECK(patch({{"traits", {1}}}).has_field("/traits/0", "must be a string"));
  CHECK(patch({{"bmc", {{"driver", nullptr}}}}).field() == "/bmc/driver");
  CHECK(patch({{"bmc", {{"driver", "floppy"}}}}).field() == "/bmc/driver");
  CHECK(patch({{"name", "bad name"}}).field() == "/name");

  Resp dup = patch({{"name", "q2"}});
  CHECK(dup.status == 409);
  CHECK(dup.field() == "/name");

  Options text;
  text.content_type = "text/plain";
  CHECK(patch({{"profile", "x"}}, text).status == 415);

  int64_t v = n["version"];
  Options stale;
  stale.headers["If-Match"] = "\"" + std::to_string(v + 5) + "\"";
  CHECK(patch({{"profile", "x"}}, stale).status == 412);
  Options bad;
  bad.headers["If-Match"] = "version-1";
  Resp bad_r = patch({{"profile", "x"}}, bad);
  CHECK(bad_r.status == 400);
  CHECK(bad_r.field() == "If-Match");
  Options good;
  good.headers["If-Match"] = "W/\"" + std::to_string(v) + "\"";
  Resp ok = patch({{"profile", "x"}}, good);
  REQUIRE(ok.status == 200);
  // The same tag again is now stale.
  CHECK(patch({{"profile", "y"}}, good).status == 412);

  // Nothing was written by the failures.
  CHECK(h.call(V::get, "/v1/nodes/" + id, h.admin()).json["version"] == v + 1);

  // A node held by an operation.
  Resp manage = h.call_json(V::put, "/v1/nodes/" + id + "/states/provision", h.admin(), {{"target", "manage"}});
  REQUIRE(manage.status == 202);
  Resp busy = patch({{"profile", "z"}});
  CHECK(busy.status == 409);
  CHECK(busy.json["detail"] == "node is busy");
  h.wait_state(id, "manageable");
  CHECK(patch({{"profile", "z"}}).status == 200);
}

TEST_CASE("DELETE node: 204 in safe states, 409 otherwise") {
  ApiHarness h;
  json a = h.enroll("d1", {{"ports", {{{"address", mac(9)}}}}});
  Resp r = h.call(V::delete_, "/v1/nodes/d1", h.admin());
  CHECK(r.status == 204);
  CHECK(r.body.empty());
  CHECK(h.call(V::get, "/v1/nodes/d1", h.admin()).status == 404);
  CHECK(h.store().find_port_by_address(mac(9)).error().code == Code::kNotFound);
  CHECK(h.call(V::delete_, "/v1/nodes/d1", h.admin()).status == 404);

  h.enroll("d2", {{"tenant", "acme"}});
  Resp held = h.call(V::delete_, "/v1/nodes/d2", h.admin());
  CHECK(held.status == 409);
  CHECK(held.json["detail"].get<std::string>().find("acme") != std::string::npos);

  json slow = h.enroll("d3", {{"bmc", {{"driver", "fake"}, {"address", "a"}, {"options", {{"step_delay_ms", 300}}}}}});
  REQUIRE(h.call_json(V::put, "/v1/nodes/d3/states/provision", h.admin(), {{"target", "manage"}}).status == 202);
  Resp busy = h.call(V::delete_, "/v1/nodes/d3", h.admin());
  CHECK(busy.status == 409);
  h.wait_state(slow["id"], "manageable");
  REQUIRE(h.call_json(V::put, "/v1/nodes/d3/states/provision", h.admin(), {{"target", "provide"}}).status == 202);
  // cleaning: a state that may not be deleted, named in the message.
  Resp cleaning = h.call(V::delete_, "/v1/nodes/d3", h.admin());
  CHECK(cleaning.status == 409);
  CHECK(cleaning.json["detail"].get<std::string>().find("cannot delete a node in state") != std::string::npos);
  h.wait_state(slow["id"], "available", std::chrono::seconds(10));
  Options stale;
  stale.headers["If-Match"] = "\"1\"";
  CHECK(h.call(V::delete_, "/v1/nodes/d3", h.admin(), "", stale).status == 412);
  CHECK(h.call(V::delete_, "/v1/nodes/d3", h.admin()).status == 204);
}
