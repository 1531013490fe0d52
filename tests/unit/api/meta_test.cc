// /healthz, /readyz, /metrics, /openapi.json and transport error replies.
#include <catch2/catch.hpp>

#include <functional>
#include <set>

#include "controller/api/openapi.h"
#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;
using V = http::bhttp::verb;

TEST_CASE("healthz and readyz") {
  ApiHarness h;
  CHECK(h.call(V::get, "/healthz", "").status == 200);
  CHECK(h.call(V::get, "/readyz", "").status == 200);
  h.api().set_ready(false);
  Resp r = h.call(V::get, "/readyz", "");
  CHECK(r.status == 503);
  CHECK(r.header("content-type") == "application/problem+json");
  h.api().set_ready(true);
  CHECK(h.call(V::get, "/readyz", "").status == 200);
  // The 503 was the probe's answer, not a refused request.
  CHECK(h.call(V::get, "/metrics", "").body.find("kiln_api_rejected_anonymous_total 0\n") != std::string::npos);
  CHECK(h.call(V::get, "/v1/nodes", "").status == 401);
  CHECK(h.call(V::get, "/metrics", "").body.find("kiln_api_rejected_anonymous_total 1\n") != std::string::npos);
}

TEST_CASE("metrics: node gauges for every state, request histogram by template, operations, connections") {
  ApiHarness h;
  h.enroll("m1");
  h.enroll("m2");
  REQUIRE(h.call_json(V::put, "/v1/nodes/m1/states/provision", h.admin(), {{"target", "manage"}}).status == 202);
  h.wait_state(h.call(V::get, "/v1/nodes/m1", h.admin()).json["id"], "manageable");
  REQUIRE(h.call(V::get, "/v1/nodes/m2", h.admin()).status == 200);

  Resp r = h.call(V::get, "/metrics", "");
  REQUIRE(r.status == 200);
  CHECK(r.header("content-type").rfind("text/plain", 0) == 0);
  const std::string& m = r.body;
  CHECK(m.find("kiln_nodes{provision_state=\"enroll\"} 1\n") != std::string::npos);
  CHECK(m.find("kiln_nodes{provision_state=\"manageable\"} 1\n") != std::string::npos);
  CHECK(m.find("kiln_nodes{provision_state=\"active\"} 0\n") != std::string::npos);
  CHECK(m.find("kiln_nodes{provision_state=\"burning_in\"} 0\n") != std::string::npos);
  CHECK(m.find("# TYPE kiln_api_request_duration_seconds histogram") != std::string::npos);
  CHECK(m.find("kiln_api_request_duration_seconds_count{method=\"GET\",route=\"/v1/nodes/{id}\"}") != std::string::npos);
  CHECK(m.find("kiln_api_request_duration_seconds_bucket{method=\"POST\",route=\"/v1/nodes\",le=\"+Inf\"} 2\n") !=
        std::string::npos);
  CHECK(m.find("route=\"/v1/nodes/m2\"") == std::string::npos);
  CHECK(m.find("kiln_operations_total{operation=\"manage\",result=\"success\"} 1\n") != std::string::npos);
  CHECK(m.find("kiln_http_connections 3\n") != std::string::npos);
}

TEST_CASE("openapi.json is the YAML spec as JSON and documents exactly the routes") {
  ApiHarness h;
  Resp r = h.call(V::get, "/openapi.json", "");
  REQUIRE(r.status == 200);
  REQUIRE(r.json.is_object());
  CHECK(r.json["openapi"] == "3.0.3");
  CHECK(r.json["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer");
  // Types survive: quoted response codes stay keys, booleans and ints are typed.
  CHECK(r.json["paths"]["/v1/nodes/{id}"]["get"]["responses"].contains("200"));
  CHECK(r.json["paths"]["/v1/nodes"]["get"]["parameters"][0].is_object());
  CHECK(r.json["components"]["parameters"]["node_id"]["required"] == true);
  CHECK(r.json["components"]["parameters"]["limit"]["schema"]["maximum"] == 1000);
  CHECK(r.json["paths"]["/v1/nodes"]["get"]["parameters"].size() >= 9);
  for (const char* s : {"Node", "Port", "Event", "Problem"}) CHECK(r.json["components"]["schemas"].contains(s));

  std::set<std::pair<std::string, std::string>> in_router, in_spec;
  for (const auto& [method, path] : h.api().routes()) {
    std::string m = method;
    for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    in_router.insert({m, path});
  }
  for (auto p = r.json["paths"].begin(); p != r.json["paths"].end(); ++p)
    for (auto op = p->begin(); op != p->end(); ++op)
      if (op.key() != "parameters") in_spec.insert({op.key(), p.key()});
  CHECK(in_router == in_spec);
  // Counted so a route added without a spec entry on both sides is noticed:
  // 24 node, port, event, token and audit routes + 3 agent routes + 10 image
  // and boot routes + 9 validation and profile routes + 7 host and virtual
  // node routes + the os agent seed + 5 tenant routes + PATCH /v1/images/{id} +
  // 5 allocation routes and /v1/usage + /v1/whoami + /v1/conductors +
  // cloud-init's POST /v1/phone-home/{token}.
  CHECK(in_router.size() == 69);

  // Every property's schema holds only Schema Object keywords (OpenAPI 3.0.3
  // section 4.7.24): an unquoted ", " inside a YAML flow mapping
  // ({description: a, b}) silently adds a key "b" of null.
  static const std::set<std::string> kSchemaKeywords = {
      "title", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
      "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties",
      "required", "enum", "type", "allOf", "oneOf", "anyOf", "not", "items", "properties",
      "additionalProperties", "description", "format", "default", "nullable", "discriminator", "readOnly",
      "writeOnly", "xml", "externalDocs", "example", "deprecated", "$ref"};
  std::vector<std::string> stray;
  std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& j,
                                                                           const std::string& at) {
    if (j.is_array())
      for (std::size_t i = 0; i < j.size(); ++i) walk(j[i], at + "/" + std::to_string(i));
    if (!j.is_object()) return;
    if (j.contains("properties") && j["properties"].is_object())
      for (auto p = j["properties"].begin(); p != j["properties"].end(); ++p) {
        if (!p->is_object()) {
          stray.push_back(at + "/properties/" + p.key());
          continue;
        }
        for (auto k = p->begin(); k != p->end(); ++k)
          if (!kSchemaKeywords.count(k.key()) && !k.key().starts_with("x-"))
            stray.push_back(at + "/properties/" + p.key() + "/" + k.key());
      }
    for (auto it = j.begin(); it != j.end(); ++it) walk(*it, at + "/" + it.key());
  };
  walk(r.json, "");
  CHECK(stray == std::vector<std::string>{});
}

TEST_CASE("error_response builds problem+json for the transport's own errors") {
  ApiHarness h;
  http::Response r = h.api().error_response(413, "body larger than 4194304 bytes");
  CHECK(r.result_int() == 413);
  CHECK(r[http::bhttp::field::content_type] == "application/problem+json");
  json p = json::parse(r.body());
  CHECK(p["status"] == 413);
  CHECK(p["title"] == "Payload Too Large");
  CHECK(p["detail"] == "body larger than 4194304 bytes");
  http::Response h431 = h.api().error_response(431, "headers too large");
  CHECK(h431.result_int() == 431);
  CHECK(json::parse(h431.body())["status"] == 431);
}

TEST_CASE("API errors are logged once with the request id") {
  ApiHarness h;
  Options o;
  o.headers["X-Ignored"] = "1";
  REQUIRE(h.call(V::get, "/v1/nodes/ghost", h.admin()).status == 404);
  int lines = 0;
  for (const std::string& l : h.log().lines())
    if (l.find("request failed") != std::string::npos && l.find("status=404") != std::string::npos) {
      ++lines;
      CHECK(l.find("request_id=req-") != std::string::npos);
      CHECK(l.find(" info ") != std::string::npos);
    }
  CHECK(lines == 1);
}
