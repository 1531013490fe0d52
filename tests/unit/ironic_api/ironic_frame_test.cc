// Microversions, credentials and the error body of the Ironic-compatible API.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "controller/ironic/ironic_auth.h"
#include "controller/ironic/ironic_error.h"
#include "controller/ironic/ironic_version.h"

using namespace kiln;
using namespace kiln::ironic;

namespace {
http::Request request_with(std::initializer_list<std::pair<std::string, std::string>> headers) {
  http::Request req{boost::beast::http::verb::get, "/ironic/v1/nodes", 11};
  for (const auto& [k, v] : headers) req.set(k, v);
  return req;
}
}  // namespace

TEST_CASE("ironic version: no header is the minimum, latest the maximum") {
  CHECK(*requested_version(request_with({})) == kMinVersion);
  CHECK(*requested_version(request_with({{"X-OpenStack-Ironic-API-Version", "latest"}})) == kMaxVersion);
  CHECK(*requested_version(request_with({{"X-OpenStack-Ironic-API-Version", "LATEST"}})) == kMaxVersion);
  CHECK(requested_version(request_with({{"X-OpenStack-Ironic-API-Version", "1.78"}}))->minor == 78);
  CHECK(kMaxVersion.minor >= 99);  // terraform sends 1.99, Metal3 needs 1.89
}

TEST_CASE("ironic version: OpenStack-API-Version baremetal wins over the legacy header") {
  auto v = requested_version(request_with({{"OpenStack-API-Version", "compute 2.1, baremetal 1.89"},
                                           {"X-OpenStack-Ironic-API-Version", "1.2"}}));
  REQUIRE(v);
  CHECK(v->minor == 89);
  // Another service's version is not ours: the legacy header decides.
  auto other = requested_version(request_with({{"OpenStack-API-Version", "compute 2.90"},
                                               {"X-OpenStack-Ironic-API-Version", "1.31"}}));
  REQUIRE(other);
  CHECK(other->minor == 31);
}

TEST_CASE("ironic version: out of range, other majors and garbage are refused with the range") {
  for (const char* bad : {"1.0", "1.100", "2.1", "0.9", "1", "1.x", "1.78.1", "", " ", "-1.5", "1.+5", "99999.1"}) {
    CAPTURE(bad);
    auto v = parse_version(bad);
    REQUIRE_FALSE(v);
    CHECK(v.error().message.find("[1.1, 1." + std::to_string(kMaxVersion.minor) + "]") != std::string::npos);
  }
}

TEST_CASE("ironic version: headers carry min, max and the served version") {
  http::Response res;
  set_version_headers(res, ApiVersion{1, 78});
  CHECK(res["X-OpenStack-Ironic-API-Minimum-Version"] == "1.1");
  CHECK(res["X-OpenStack-Ironic-API-Maximum-Version"] == kMaxVersion.str());
  CHECK(res["X-OpenStack-Ironic-API-Version"] == "1.78");
  CHECK(res["OpenStack-API-Version"] == "baremetal 1.78");
}

TEST_CASE("ironic version documents have Ironic's shape") {
  nlohmann::json root = root_document("http://h:1/ironic");
  REQUIRE(root["versions"].is_array());
  CHECK(root["versions"][0]["status"] == "CURRENT");
  CHECK(root["versions"][0]["min_version"] == "1.1");
  CHECK(root["versions"][0]["links"][0]["href"] == "http://h:1/ironic/v1/");
  CHECK(root["default_version"]["id"] == "v1");
  nlohmann::json v1 = v1_document("http://h:1/ironic");
  CHECK(v1["id"] == "v1");
  CHECK(v1["version"]["version"] == kMaxVersion.str());
  CHECK(v1["nodes"][0]["href"] == "http://h:1/ironic/v1/nodes/");
}

TEST_CASE("ironic error body is error_message holding a JSON string") {
  http::Request req{boost::beast::http::verb::get, "/", 11};
  http::Response res = error_response(req, Error::invalid("/driver_info/redfish_address", "required"));
  CHECK(res.result_int() == 400);
  CHECK(res[boost::beast::http::field::content_type] == "application/json");
  nlohmann::json body = nlohmann::json::parse(res.body());
  REQUIRE(body["error_message"].is_string());
  nlohmann::json inner = nlohmann::json::parse(body["error_message"].get<std::string>());
  CHECK(inner["faultcode"] == "Client");
  CHECK(inner["faultstring"] == "/driver_info/redfish_address: required");
  CHECK(inner["debuginfo"].is_null());
  http::Response server = error_response(req, Error(Code::kInternal, "boom"));
  CHECK(nlohmann::json::parse(nlohmann::json::parse(server.body())["error_message"].get<std::string>())["faultcode"] ==
        "Server");
}

TEST_CASE("ironic status: only statuses Ironic answers with") {
  CHECK(ironic_status(Code::kPreconditionFailed) == 409);
  CHECK(ironic_status(Code::kUnprocessable) == 400);
  CHECK(ironic_status(Code::kDriverError) == 503);
  CHECK(ironic_status(Code::kTimeout) == 503);
  CHECK(ironic_status(Code::kNotFound) == 404);
  CHECK(ironic_status(Code::kUnauthenticated) == 401);
}

TEST_CASE("ironic credentials: X-Auth-Token, Basic with id or name, Bearer") {
  auto t = read_credential(request_with({{"X-Auth-Token", " kiln_abc "}}));
  REQUIRE(t);
  CHECK(t->secret == "kiln_abc");
  CHECK_FALSE(t->user);
  auto b = read_credential(request_with({{"Authorization", "Basic " + base64_encode("ops:kiln_s:x")}}));
  REQUIRE(b);
  CHECK(*b->user == "ops");
  CHECK(b->secret == "kiln_s:x");  // the secret may hold ':'; the user may not
  auto br = read_credential(request_with({{"Authorization", "bearer kiln_q"}}));
  REQUIRE(br);
  CHECK(br->secret == "kiln_q");
}

TEST_CASE("ironic credentials: missing or malformed is 401 without echoing the secret") {
  for (auto headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {},
           {{"X-Auth-Token", ""}},
           {{"Authorization", "Basic !!!notbase64"}},
           {{"Authorization", "Basic " + base64_encode("nocolon")}},
           {{"Authorization", "Basic " + base64_encode(":secret-only")}},
           {{"Authorization", "Basic " + base64_encode("user:")}},
           {{"Authorization", "Digest abc"}},
           {{"X-Auth-Token", "kiln_\x01secret"}}}) {
    http::Request req{boost::beast::http::verb::get, "/", 11};
    for (const auto& [k, v] : headers) req.set(k, v);
    auto c = read_credential(req);
    REQUIRE_FALSE(c);
    CHECK(c.error().code == Code::kUnauthenticated);
    CHECK(c.error().message.find("secret-only") == std::string::npos);
  }
}
