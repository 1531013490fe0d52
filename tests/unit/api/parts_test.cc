// The API's building blocks on their own: router, merge patch, body
// validation, YAML->JSON, MAC/name rules, query parsing, problem documents.
#include <catch2/catch.hpp>

#include "controller/api/host_input.h"
#include "controller/api/json_input.h"
#include "controller/api/merge_patch.h"
#include "controller/api/metrics.h"
#include "controller/api/node_input.h"
#include "controller/api/openapi.h"
#include "controller/api/port_input.h"
#include "controller/api/problem.h"
#include "controller/api/query.h"
#include "controller/api/reply.h"
#include "controller/api/route_table.h"
#include "controller/api/router.h"
#include "controller/api/token_input.h"

using namespace kiln;
using namespace kiln::api;
using nlohmann::json;

TEST_CASE("router matches templates, captures, 404 and 405 with allowed methods") {
  Router r;
  auto list = r.add(bhttp::verb::get, "/v1/nodes");
  auto create = r.add(bhttp::verb::post, "/v1/nodes");
  auto one = r.add(bhttp::verb::get, "/v1/nodes/{id}");
  auto power = r.add(bhttp::verb::put, "/v1/nodes/{id}/states/power");
  auto stream = r.add(bhttp::verb::get, "/v1/events/stream");

  auto m = r.match(bhttp::verb::get, "/v1/nodes");
  REQUIRE(m.kind == RouteMatch::Kind::kFound);
  CHECK(m.index == list);
  CHECK(r.match(bhttp::verb::post, "/v1/nodes").index == create);

  m = r.match(bhttp::verb::put, "/v1/nodes/n%2D1/states/power");
  REQUIRE(m.kind == RouteMatch::Kind::kFound);
  CHECK(m.index == power);
  CHECK(m.params.at("id") == "n-1");
  CHECK(*m.pattern == "/v1/nodes/{id}/states/power");
  CHECK(r.match(bhttp::verb::get, "/v1/nodes/abc").index == one);
  CHECK(r.match(bhttp::verb::get, "/v1/events/stream").index == stream);

  CHECK(r.match(bhttp::verb::get, "/v1/nodes/").kind == RouteMatch::Kind::kNotFound);
  CHECK(r.match(bhttp::verb::get, "/v1/nodes/a/b").kind == RouteMatch::Kind::kNotFound);
  CHECK(r.match(bhttp::verb::get, "/v2/nodes").kind == RouteMatch::Kind::kNotFound);
  CHECK(r.match(bhttp::verb::get, "/v1/nodes/%zz").kind == RouteMatch::Kind::kNotFound);

  m = r.match(bhttp::verb::delete_, "/v1/nodes");
  REQUIRE(m.kind == RouteMatch::Kind::kMethodNotAllowed);
  CHECK(m.allowed == std::vector<bhttp::verb>{bhttp::verb::get, bhttp::verb::post});
  CHECK(r.routes().size() == 5);
}

TEST_CASE("a route reads its path parameters, and one its template lacks as empty") {
  kiln::http::Request req;
  kiln::http::RequestInfo info;
  PathParams params{{"id", "n1"}};
  auto query = Query::parse("");
  REQUIRE(query);
  kiln::api::Principal who;
  kiln::api::Call call{req, info, params, *query, who, kiln::Logger{}};
  CHECK(call.param("id") == "n1");
  CHECK(call.param("port_id").empty());  // was a read through params.end()
}

TEST_CASE("merge patch follows RFC 7396") {
  // The RFC's appendix A examples, a selection.
  auto patched = [](json target, json patch) {
    apply_merge_patch(target, patch);
    return target;
  };
  CHECK(patched({{"a", "b"}}, {{"a", "c"}}) == json({{"a", "c"}}));
  CHECK(patched({{"a", "b"}}, {{"b", "c"}}) == json({{"a", "b"}, {"b", "c"}}));
  CHECK(patched({{"a", "b"}}, {{"a", nullptr}}) == json::object());
  CHECK(patched({{"a", {{"b", "c"}}}}, {{"a", {{"b", "d"}, {"c", nullptr}}}}) ==
        json({{"a", {{"b", "d"}}}}));
  CHECK(patched({{"a", json::array({"b"})}}, {{"a", "c"}}) == json({{"a", "c"}}));
  CHECK(patched({{"a", "foo"}}, "bar") == json("bar"));
  CHECK(patched({{"e", nullptr}}, {{"a", 1}}) == json({{"e", nullptr}, {"a", 1}}));
  CHECK(patched(json::array({1, 2}), {{"a", "b"}, {"c", nullptr}}) == json({{"a", "b"}}));
  CHECK(patched(json::object(), {{"a", {{"bb", {{"ccc", nullptr}}}}}}) == json({{"a", {{"bb", json::object()}}}}));
}

TEST_CASE("object reader reports pointers for type errors and unknown fields") {
  std::vector<FieldError> errors;
  json body = {{"name", 5}, {"traits", {"a", 2}}, {"colour", "red"}, {"bmc", {{"x~y/z", 1}}}};
  ObjectReader r(body, "", errors);
  CHECK_FALSE(r.string("name"));
  CHECK_FALSE(r.string_array("traits"));
  const json* bmc = r.object("bmc");
  REQUIRE(bmc);
  ObjectReader b(*bmc, r.pointer("bmc"), errors);
  CHECK_FALSE(b.string("driver", true));
  b.finish();
  r.finish();
  auto has = [&](const std::string& f, const std::string& m) {
    for (const auto& e : errors)
      if (e.field == f && e.message == m) return true;
    return false;
  };
  CHECK(has("/name", "must be a string"));
  CHECK(has("/traits/1", "must be a string"));
  CHECK(has("/colour", "unknown field"));
  CHECK(has("/bmc/driver", "required"));
  CHECK(has("/bmc/x~0y~1z", "unknown field"));
  CHECK(errors.size() == 5);
}

TEST_CASE("parse_json_body checks media type and never echoes the body") {
  http::Request req{bhttp::verb::post, "/", 11};
  req.body() = R"({"password": "hunter2-secret" )";
  req.set(bhttp::field::content_type, "text/plain");
  auto r = parse_json_body(req, {"application/json"});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnsupportedMedia);

  req.set(bhttp::field::content_type, "Application/JSON; charset=utf-8");
  r = parse_json_body(req, {"application/json"});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kInvalidArgument);
  CHECK(r.error().fields.at(0).field == "");
  CHECK(r.error().message.find("hunter2") == std::string::npos);

  req.body() = "";
  CHECK(parse_json_body(req, {"application/json"}, true).value() == json::object());
  req.body() = R"({"a":1})";
  CHECK(parse_json_body(req, {"application/json"}).value() == json({{"a", 1}}));
}

TEST_CASE("MACs are normalized and names validated") {
  CHECK(normalize_mac("52:54:00:AB:cd:EF") == "52:54:00:ab:cd:ef");
  CHECK(normalize_mac("52-54-00-ab-cd-ef") == "52:54:00:ab:cd:ef");
  CHECK_FALSE(normalize_mac("52:54-00:ab:cd:ef"));
  CHECK_FALSE(normalize_mac("52:54:00:ab:cd"));
  CHECK_FALSE(normalize_mac("52:54:00:ab:cd:eg"));
  CHECK_FALSE(normalize_mac("525400abcdef"));
  CHECK(valid_node_name("gpu-01.rack_3~a"));
  CHECK_FALSE(valid_node_name(""));
  CHECK_FALSE(valid_node_name(std::string(256, 'a')));
  CHECK(valid_node_name(std::string(255, 'a')));
  CHECK_FALSE(valid_node_name("has space"));
  CHECK_FALSE(valid_node_name("a/b"));
  CHECK_FALSE(valid_node_name("123e4567-e89b-12d3-a456-426614174000"));
}

TEST_CASE("query strings decode, unknown keys and bad limits are refused") {
  auto q = Query::parse("a=x%20y&b=1+2&flag");
  REQUIRE(q);
  CHECK(q->get("a") == "x y");
  CHECK(q->get("b") == "1 2");
  CHECK(q->get("flag") == "");
  auto known = q->check_known({"a", "b"});
  REQUIRE_FALSE(known);
  CHECK(known.error().fields.at(0).field == "flag");
  CHECK_FALSE(Query::parse("a=%4"));
  for (const char* bad : {"limit=0", "limit=1001", "limit=abc", "limit=5x", "limit=-1"}) {
    auto l = Query::parse(bad)->limit();
    REQUIRE_FALSE(l);
    CHECK(l.error().fields.at(0).field == "limit");
  }
  CHECK(Query::parse("limit=1000")->limit().value() == 1000);
  CHECK(Query::parse("")->limit().value() == 100);
}

TEST_CASE("If-Match accepts strong and weak version tags only") {
  http::Request req{bhttp::verb::patch, "/", 11};
  CHECK_FALSE(parse_if_match(req).value().has_value());
  req.set(bhttp::field::if_match, "\"7\"");
  CHECK(parse_if_match(req).value() == 7);
  req.set(bhttp::field::if_match, "W/\"8\"");
  CHECK(parse_if_match(req).value() == 8);
  for (const char* bad : {"7", "\"x\"", "W/7", "\"\"", "\"-1\""}) {
    req.set(bhttp::field::if_match, bad);
    auto r = parse_if_match(req);
    REQUIRE_FALSE(r);
    CHECK(r.error().fields.at(0).field == "If-Match");
  }
}

TEST_CASE("yaml_to_json types plain scalars and keeps quoted ones as strings") {
  auto j = yaml_to_json(R"(
a: true
b: "true"
c: 42
d: '42'
e: 1.5
f: ~
g: null
h: plain text
i: [1, "2", no]
"200": {x: -3}
j: ""
k: 1e3
)");
  REQUIRE(j);
  CHECK((*j)["a"] == true);
  CHECK((*j)["b"] == "true");
  CHECK((*j)["c"] == 42);
  CHECK((*j)["d"] == "42");
  CHECK((*j)["e"] == 1.5);
  CHECK((*j)["f"].is_null());
  CHECK((*j)["g"].is_null());
  CHECK((*j)["h"] == "plain text");
  CHECK((*j)["i"] == json::array({1, "2", "no"}));
  CHECK((*j)["200"]["x"] == -3);
  CHECK((*j)["j"] == "");
  CHECK((*j)["k"] == 1000.0);
  CHECK_FALSE(yaml_to_json("a: [unclosed"));
}

TEST_CASE("problem documents follow RFC 9457 and use http_status") {
  Error e(Code::kConflict, "node is busy", {{"/name", "already in use"}});
  json p = problem_json(e);
  CHECK(p["status"] == 409);
  CHECK(p["title"] == "Conflict");
  CHECK(p["detail"] == "node is busy");
  CHECK(p["type"] == "https://kiln.dev/problems/conflict");
  CHECK(p["errors"][0] == json({{"field", "/name"}, {"message", "already in use"}}));
  auto res = problem_response(Error(Code::kUnauthenticated, "no"));
  CHECK(res.result_int() == 401);
  CHECK(res[bhttp::field::www_authenticate] == "Bearer");
  CHECK(res[bhttp::field::content_type] == "application/problem+json");
  CHECK(res.find(bhttp::field::retry_after) == res.end());
  // A 503 (store unavailable, not ready) and a 507 (disk full) tell the
  // client when to come back, whichever code path raised them.
  auto busy = problem_response(Error(Code::kUnavailable, "the database is unreachable"));
  CHECK(busy.result_int() == 503);
  CHECK(busy[bhttp::field::retry_after] == "5");
  auto full = problem_response(Error(Code::kInsufficientStorage, "no space left on device: data directory /d"));
  CHECK(full.result_int() == 507);
  CHECK(full[bhttp::field::retry_after] == "5");
  CHECK(json::parse(full.body())["type"] == "https://kiln.dev/problems/insufficient-storage");
  CHECK(problem_response(Error(Code::kInternal, "x"), 11, true, 503)[bhttp::field::retry_after] == "5");
  CHECK(code_for_status(413) == Code::kPayloadTooLarge);
  CHECK(code_for_status(507) == Code::kInsufficientStorage);
  CHECK(code_for_status(599) == Code::kInternal);
}

TEST_CASE("request histogram is cumulative and labelled by template") {
  RequestMetrics m;
  m.observe(bhttp::verb::get, "/v1/nodes/{id}", 0.003);
  m.observe(bhttp::verb::get, "/v1/nodes/{id}", 0.2);
  std::string out;
  m.render(out);
  CHECK(out.find("kiln_api_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/nodes/{id}\",le=\"0.005\"} 1\n") !=
        std::string::npos);
  CHECK(out.find("le=\"0.25\"} 2\n") != std::string::npos);
  CHECK(out.find("le=\"+Inf\"} 2\n") != std::string::npos);
  CHECK(out.find("kiln_api_request_duration_seconds_count{method=\"GET\",route=\"/v1/nodes/{id}\"} 2\n") !=
        std::string::npos);
  CHECK(escape_label("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
}

TEST_CASE("body readers of ports, tokens and hosts: every bad field named, secrets never echoed", "[parts]") {
  using nlohmann::json;
  auto fields = [](const kiln::Error& e) {
    std::vector<std::string> out;
    for (const auto& f : e.fields) out.push_back(f.field);
    return out;
  };
  auto port = kiln::api::parse_port_create(json{{"node", "n1"}, {"address", "AA-BB-CC-DD-EE-01"}});
  REQUIRE(port);
  CHECK(port->mac == "aa:bb:cc:dd:ee:01");
  CHECK(port->pxe);
  auto bad_port = kiln::api::parse_port_create(json{{"address", "zz"}, {"extra", 1}});
  REQUIRE_FALSE(bad_port);
  CHECK(fields(bad_port.error()) == std::vector<std::string>{"/node", "/extra", "/address"});

  auto token = kiln::api::parse_token_create(json{{"name", "ci"}, {"role", "tenant"}, {"tenant", "acme"}});
  REQUIRE(token);
  CHECK(token->role == kiln::api::Role::kTenant);
  CHECK(token->tenant == "acme");
  auto bad_token = kiln::api::parse_token_create(json{{"name", ""}, {"role", "operator"}, {"tenant", "x"}});
  REQUIRE_FALSE(bad_token);
  CHECK(fields(bad_token.error()) == std::vector<std::string>{"/name", "/tenant"});

  auto host = kiln::api::parse_host_create(
      json{{"name", "hv1"}, {"uri", "qemu+ssh://root@10.0.0.5/system"}, {"password", "pw"},
           {"options", {{"force_tcg", true}, {"cpu_allocation_ratio", 2}, {"reserved_memory_mib", 4096}}}});
  REQUIRE(host);
  CHECK(host->host.options.force_tcg);
  CHECK(host->password == std::optional<std::string>("pw"));
  auto bad_host = kiln::api::parse_host_create(
      json{{"name", "hv2"}, {"uri", "qemu+ssh://root:hunter2@h/system"}, {"options", {{"cpu_allocation_ratio", 0}}}});
  REQUIRE_FALSE(bad_host);
  CHECK(fields(bad_host.error()) == std::vector<std::string>{"/uri", "/options/cpu_allocation_ratio"});
  CHECK(bad_host.error().message.find("hunter2") == std::string::npos);
  for (const auto& f : bad_host.error().fields) CHECK(f.message.find("hunter2") == std::string::npos);
}
