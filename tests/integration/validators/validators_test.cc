// What other programs parse, checked by programs Kiln did not write, against
// a real kilnd (issue: external validators for every public format):
//
//   /openapi.json  @apidevtools/swagger-parser: the OAI's OpenAPI 3.0 JSON
//                  Schema (Ajv) plus $ref resolution and its spec rules
//   /metrics       promtool check metrics (Prometheus' own linter)
//   problem+json   RFC 9457's members, checked member by member here
//                  (there is no reference validator; this file is its own
//                  reading of the RFC, independent of controller/api/problem.cc)
//   /v1/events/stream  the `eventsource` npm package, a WHATWG EventSource,
//                  including its own reconnect with Last-Event-ID
//
// Each tool missing on this machine makes its case SKIPPED, never passed:
// node and web/node_modules (npm ci in web/; the packages are web/'s
// devDependencies), promtool (scripts/install-deps). Each validator is also
// shown refusing a known-bad input, so a case cannot pass because the tool
// accepts everything. The CLI's files (ssh_config, inventory.ini,
// known_hosts) are read by ssh, ansible-inventory and ssh-keygen in
// tests/unit/cli/file_readers_test.cc. The /ironic prefix answers errors in
// Ironic's own format by design and is not checked as problem+json here.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/child_process.h"
#include "kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/skip.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "kiln_validators_admin_token_0001";
Headers auth(const std::string& t = kToken) { return {{"Authorization", "Bearer " + t}}; }

// `name` on PATH, or skips the running case.
std::string program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const std::filesystem::path p = std::filesystem::path(d) / name;
    if (!d.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  KILN_SKIP(name << " is not installed (scripts/install-deps installs it)");
}

// Runs argv; a script that exits 77 (its npm package is missing) skips the case.
kiln::ProgramOutput run(const std::vector<std::string>& argv, std::chrono::seconds limit = 60s) {
  kiln::Result<kiln::ProgramOutput> r = kiln::run_program(argv, limit);
  REQUIRE(r);
  if (kiln::exit_code(r->status) == 77) KILN_SKIP(r->out << r->err);
  return *r;
}

std::string node_script(const std::string& name) { return std::string(KILN_VALIDATORS_DIR) + "/" + name; }

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TestResponse call(HttpTestClient& c, const std::string& method, const std::string& target, const json& body,
                  const std::string& token = kToken) {
  return c.request(method, target, body.is_null() ? "" : body.dump(), token.empty() ? Headers{} : auth(token));
}

json ok(HttpTestClient& c, const std::string& method, const std::string& target, const json& body = nullptr,
        const std::string& token = kToken) {
  TestResponse r = call(c, method, target, body, token);
  INFO(method << " " << target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status / 100 == 2);
  return r.body.empty() ? json() : json::parse(r.body);
}

}  // namespace

TEST_CASE("validators: the served OpenAPI document passes the OpenAPI 3.0 schema, and the old heartbeat schema does not") {
  const std::string node = program("node");
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  TestResponse r = c.request("GET", "/openapi.json");
  REQUIRE(r.status == 200);
  const std::string served = write_file(dir.path() + "/openapi.json", r.body);
  kiln::ProgramOutput v = run({node, node_script("openapi_validate.mjs"), KILN_WEB_DIR, served});
  INFO(v.out << v.err);
  CHECK(kiln::exit_code(v.status) == 0);

  // The document as it was before 73d877b: the heartbeat's `busy` had a
  // stray `or empty: null` key (unquoted YAML). The validator refuses it,
  // naming the property: it checks the schema, not only the syntax.
  json old = json::parse(r.body);
  json& busy = old["paths"]["/v1/agent/heartbeat"]["post"]["requestBody"]["content"]["application/json"]["schema"]
                  ["properties"]["busy"];
  REQUIRE(busy.is_object());
  busy["or empty"] = nullptr;
  kiln::ProgramOutput bad =
      run({node, node_script("openapi_validate.mjs"), KILN_WEB_DIR, write_file(dir.path() + "/old.json", old.dump())});
  INFO(bad.out << bad.err);
  CHECK(kiln::exit_code(bad.status) == 1);
  CHECK_THAT(bad.out, Catch::Contains("properties/busy must NOT have additional properties"));
}

TEST_CASE("validators: /metrics after real traffic passes promtool check metrics, and promtool refuses a bad exposition") {
  const std::string promtool = program("promtool");
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  // Traffic so every family has samples: requests on several routes, an
  // anonymous refusal, and operations that finish (manage on fake nodes).
  for (int i = 0; i < 2; ++i) {
    const std::string name = "m" + std::to_string(i);
    ok(c, "POST", "/v1/nodes", {{"name", name}, {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}}}});
    ok(c, "PUT", "/v1/nodes/" + name + "/states/provision", {{"target", "manage"}});
  }
  CHECK(c.request("GET", "/v1/nodes").status == 401);
  CHECK(call(c, "GET", "/v1/nodes/nope", nullptr).status == 404);
  std::string metrics;
  for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;
       std::this_thread::sleep_for(50ms)) {
    metrics = c.request("GET", "/metrics").body;
    if (metrics.find("kiln_operations_total{") != std::string::npos) break;
  }
  INFO(metrics);
  REQUIRE(metrics.find("kiln_operations_total{") != std::string::npos);
  REQUIRE(metrics.find("kiln_api_request_duration_seconds_count{method=\"GET\"") != std::string::npos);

  auto check = [&](const std::string& file) {
    return run({"/bin/sh", "-c", "\"$0\" check metrics < \"$1\"", promtool, file});
  };
  kiln::ProgramOutput v = check(write_file(dir.path() + "/metrics.txt", metrics));
  INFO(v.out << v.err);
  CHECK(kiln::exit_code(v.status) == 0);
  CHECK(v.out + v.err == "");

  // promtool does lint: a counter without _total and a family without HELP.
  kiln::ProgramOutput bad = check(write_file(dir.path() + "/bad.txt", "# TYPE kiln_things counter\nkiln_things 1\n"));
  INFO(bad.out << bad.err);
  CHECK(kiln::exit_code(bad.status) != 0);
  CHECK_THAT(bad.out + bad.err, Catch::Contains("_total"));
}

namespace {

// RFC 3986 URI-reference, as far as a problem `type` or `instance` can be
// told apart from free text: no blank, control or non-ASCII byte, none of
// the characters RFC 3986 excludes, and a scheme (if any) that is one.
bool is_uri_reference(const std::string& s) {
  static const std::regex kUriChars(R"([A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*)");
  static const std::regex kScheme(R"(^[A-Za-z][A-Za-z0-9+.\-]*:.*)");
  if (!std::regex_match(s, kUriChars)) return false;
  const auto colon = s.find(':'), slash = s.find('/');
  // A colon before any slash makes the first segment a scheme.
  if (colon != std::string::npos && (slash == std::string::npos || colon < slash)) return std::regex_match(s, kScheme);
  return true;
}

struct ProblemCase {
  std::string family, method, target, body;
  Headers headers;
  int status;
  std::string raw = {};  // sent as is instead (what the test client will not send)
};

}  // namespace

TEST_CASE("validators: every problem+json body carries RFC 9457's members, status equal to the reply's, on every route family") {
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  ok(c, "POST", "/v1/nodes", {{"name", "p0"}, {"bmc", {{"driver", "fake"}, {"address", "bmc-p0"}}}});
  ok(c, "POST", "/v1/tenants", {{"name", "acme"}});
  const std::string tenant = ok(c, "POST", "/v1/tokens", {{"name", "t"}, {"role", "tenant"}, {"tenant", "acme"}})["token"];
  const Headers admin = auth(), json_admin = {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/json"}};

  const std::vector<ProblemCase> cases = {
      {"meta", "GET", "/nosuch", "", {}, 404},
      {"meta", "DELETE", "/metrics", "", admin, 405},
      {"transport", "GET", "/v1/nodes", "", {}, 431,
       "GET /v1/nodes HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70000, 'a') + "\r\n\r\n"},
      {"nodes", "GET", "/v1/nodes", "", {}, 401},
      {"nodes", "GET", "/v1/nodes", "", auth("not-a-token-0000000000"), 401},
      {"nodes", "GET", "/v1/nodes?limit=abc", "", admin, 400},
      {"nodes", "POST", "/v1/nodes", "{bad", json_admin, 400},
      {"nodes", "POST", "/v1/nodes", "x", {{"Authorization", "Bearer " + kToken}, {"Content-Type", "text/plain"}}, 415},
      {"nodes", "POST", "/v1/nodes", R"({"name":"p0","bmc":{"driver":"fake","address":"bmc-x"}})", json_admin, 409},
      // Refused on its Content-Length, before the body is sent.
      {"nodes", "POST", "/v1/nodes", "", {}, 413,
       "POST /v1/nodes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kToken +
           "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(5 << 20) + "\r\n\r\n{"},
      {"nodes", "POST", "/v1/nodes", R"({"name":"t0","bmc":{"driver":"fake","address":"b"}})",
       {{"Authorization", "Bearer " + tenant}, {"Content-Type", "application/json"}}, 403},
      {"nodes", "GET", "/v1/nodes/nope", "", admin, 404},
      {"nodes", "PATCH", "/v1/nodes/p0", R"({"name":"p1"})",
       {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/merge-patch+json"}, {"If-Match", "\"999\""}}, 412},
      {"verbs", "PUT", "/v1/nodes/p0/states/provision", R"({"target":"deploy"})", json_admin, 409},
      {"ports", "GET", "/v1/ports/nope", "", admin, 404},
      {"images", "GET", "/v1/images/nope", "", admin, 404},
      {"profiles", "GET", "/v1/profiles/nope", "", admin, 404},
      {"tenants", "GET", "/v1/tenants/nope", "", admin, 404},
      {"tokens", "POST", "/v1/tokens", R"({"name":"x","role":"admin"})",
       {{"Authorization", "Bearer " + tenant}, {"Content-Type", "application/json"}}, 403},
      {"allocations", "GET", "/v1/allocations/nope", "", admin, 404},
      {"events", "GET", "/v1/events?since=x", "", admin, 400},
      {"events", "PATCH", "/v1/events", "", admin, 405},
      {"conductors", "GET", "/v1/conductors", "", auth(tenant), 403},
      {"hosts", "GET", "/v1/hosts/nope", "", admin, 404},
      {"validations", "GET", "/v1/validations/nope", "", admin, 404},
      {"usage", "GET", "/v1/usage?from=x", "", admin, 400},
      {"agent", "POST", "/v1/agent/heartbeat", "{}", {{"Content-Type", "application/json"}}, 401},
      {"nocloud", "GET", "/v1/nocloud/nope/meta-data", "", {}, 404},
      {"boot", "GET", "/boot/nope", "", {}, 404},
  };
  std::map<std::string, std::set<std::string>> titles_of_type;
  std::set<std::string> families;
  for (const ProblemCase& pc : cases) {
    INFO(pc.family << ": " << pc.method << " " << pc.target.substr(0, 60));
    HttpTestClient one("127.0.0.1", k.port());  // a fresh connection: 413 and 431 close theirs
    TestResponse r;
    if (!pc.raw.empty()) {
      one.send_raw(pc.raw);
      r = one.read_response();
    } else {
      r = one.request(pc.method, pc.target, pc.body, pc.headers);
    }
    INFO(r.status << " " << r.body.substr(0, 300));
    CHECK(r.status == pc.status);
    CHECK(r.header("Content-Type") == "application/problem+json");
    if (r.status == 405) CHECK_FALSE(r.header("Allow").empty());  // RFC 9110 15.5.6
    json p = json::parse(r.body, nullptr, false);
    REQUIRE(p.is_object());
    // RFC 9457 3.1: type (URI reference), title, status (the reply's),
    // detail; instance optional (URI reference); extensions allowed.
    REQUIRE(p.contains("type"));
    REQUIRE(p["type"].is_string());
    CHECK(is_uri_reference(p["type"]));
    REQUIRE(p["title"].is_string());
    CHECK_FALSE(p["title"].get<std::string>().empty());
    REQUIRE(p["status"].is_number_integer());
    CHECK(p["status"] == r.status);
    REQUIRE(p["detail"].is_string());
    CHECK_FALSE(p["detail"].get<std::string>().empty());
    if (p.contains("instance")) CHECK((p["instance"].is_string() && is_uri_reference(p["instance"])));
    titles_of_type[p["type"]].insert(p["title"]);
    families.insert(pc.family);
  }
  // 3.1.3: a type's title "SHOULD NOT change from occurrence to occurrence".
  for (const auto& [type, titles] : titles_of_type) {
    INFO(type);
    CHECK(titles.size() == 1);
  }
  CHECK(families.size() >= 15);

  // The check itself refuses what RFC 9457 does not allow.
  CHECK_FALSE(is_uri_reference("not a uri"));
  CHECK_FALSE(is_uri_reference("1http://x"));
  CHECK(is_uri_reference("https://kiln.dev/problems/not-found"));
  CHECK(is_uri_reference("/v1/nodes/p0"));
}

TEST_CASE("validators: an independent EventSource client gets every event once with its id and name, and resumes a dropped stream without a gap or a repeat") {
  const std::string node = program("node");
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  json before = ok(c, "GET", "/v1/events?limit=1000");
  const int64_t since = before["events"].empty() ? 0 : before["events"].back()["seq"].get<int64_t>();

  kiln::ProgramOutput out = run({node, node_script("sse_client.mjs"), KILN_WEB_DIR,
                                 "http://127.0.0.1:" + std::to_string(k.port()), kToken, std::to_string(since), "3"});
  INFO(out.out << out.err);
  REQUIRE(kiln::exit_code(out.status) == 0);
  json got = json::parse(out.out);

  // The proxy cut the first connection; the client reconnected by itself,
  // sending the id of the last event it had received.
  REQUIRE(got["connections"].size() == 2);
  CHECK(got["connections"][0]["last_event_id"].is_null());
  REQUIRE(got["cut_after"].is_string());
  CHECK(got["connections"][1]["last_event_id"] == got["cut_after"]);

  // Exactly the stored events after `since`, in order, each once: the id is
  // the seq, the event name is the type, the data is the event.
  json stored = ok(c, "GET", "/v1/events?limit=1000&since=" + std::to_string(since))["events"];
  std::vector<std::string> streamed, expected;
  for (const json& e : got["events"]) {
    json data = json::parse(e["data"].get<std::string>());
    CHECK(e["id"] == std::to_string(data["seq"].get<int64_t>()));
    CHECK(e["type"] == data["type"]);
    streamed.push_back(e["id"].get<std::string>() + " " + e["type"].get<std::string>());
  }
  REQUIRE_FALSE(got["events"].empty());
  const int64_t last = std::stoll(got["events"].back()["id"].get<std::string>());
  for (const json& e : stored)
    if (e["seq"].get<int64_t>() <= last)
      expected.push_back(std::to_string(e["seq"].get<int64_t>()) + " " + e["type"].get<std::string>());
  CHECK(streamed == expected);
  CHECK(streamed.size() >= 3 + 3 * 2);  // created, enroll>verifying>manageable per node
}
