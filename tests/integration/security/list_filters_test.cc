// Hostile values through every list filter, query parameter and path name of
// a real kilnd, once on SQLite and once on a real PostgreSQL server: SQL
// quoting ("' OR '1'='1", "'; DROP TABLE nodes; --", E'\'', $1), LIKE
// wildcards (%, _), a percent-encoded NUL (which libpq would take as the end
// of a text parameter: "acme%00x" read as "acme"), bytes that are not UTF-8,
// long strings, and other scripts. Each request must answer 400 naming the
// parameter, 404 for a reference that names nothing, or 200 with exactly the
// rows that match the value literally (none here), never 500 and never more
// rows; afterwards every row is still there. A tenant token's filters cannot
// widen its view.
//
// One kilnd per engine and every parameter in one process, so the whole file
// runs in a few seconds.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/kilnd/kilnd_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/postgres_server.h"
#include "tests/support/skip.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kToken = "kiln_list_filters_admin_token_001";
const char* const kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8 ci@example";

Headers bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}};
}

// Every byte but unreserved ones as %XX, so the value reaches kilnd's
// decoder exactly as written here.
std::string encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

// The values an attacker tries. Printable in failure messages via label().
struct Hostile {
  std::string label;
  std::string value;
};

std::vector<Hostile> hostile_values() {
  using namespace std::string_literals;
  return {
      {"quote-or", "' OR '1'='1"},
      {"drop", "'; DROP TABLE nodes; --"},
      {"double-quote", "\" OR \"\"=\""},
      {"backslash", "\\"},
      {"percent", "%"},
      {"underscore", "_"},
      {"like-one-char", "cpu_lab"},   // cpu-lab exists: a LIKE would match it
      {"like-prefix", "cpu%"},
      {"like-seven", "_______"},      // as many wildcards as "cpu-lab" has characters
      {"placeholder", "$1"},
      {"e-string", "E'\\''"},
      {"comment", "acme'--"},
      {"nul-tail", "acme\0' OR '1'='1"s},  // libpq would send "acme"
      {"nul-profile", "cpu-lab\0x"s},
      {"nul-only", "\0"s},
      {"invalid-utf8", "\xff\xfe"},
      {"overlong-utf8", "\xc0\xaf"},
      {"unicode", "\xc3\xb1\xf0\x9f\x98\x80\xe2\x80\xae"},  // ñ, an emoji, RIGHT-TO-LEFT OVERRIDE
      {"newline", "acme\r\nX-Injected: 1"},
      {"long", std::string(12000, 'A')},  // under the 16 KiB header limit: reaches the store
  };
}

struct Param {
  std::string route;  // path, no query
  std::string name;
  // What a hostile value may get besides 400 naming the parameter: 200 with
  // `collection` empty (a filter), or 404 (a reference to a row that must
  // exist, as the route documents).
  std::string collection;  // "" when 200 is not acceptable
  bool not_found_ok = false;
};

// Every list route and its query parameters (controller/api/*_routes.cc).
std::vector<Param> list_params(const std::string& node_id) {
  const std::string validations = "/v1/nodes/" + node_id + "/validations";
  return {
      {"/v1/nodes", "provision_state", "", false},
      {"/v1/nodes", "kind", "", false},
      {"/v1/nodes", "maintenance", "", false},
      {"/v1/nodes", "sort", "", false},
      {"/v1/nodes", "limit", "", false},
      {"/v1/nodes", "marker", "", false},
      {"/v1/nodes", "fields", "", false},
      {"/v1/nodes", "profile", "nodes", false},
      {"/v1/nodes", "tenant", "nodes", false},
      {"/v1/nodes", "allocation", "nodes", false},
      {"/v1/nodes/" + node_id, "fields", "", false},
      {"/v1/ports", "limit", "", false},
      {"/v1/ports", "marker", "", false},
      {"/v1/ports", "node", "", false},
      {"/v1/allocations", "state", "", false},
      {"/v1/allocations", "tenant", "allocations", false},
      {"/v1/usage", "from", "", false},
      {"/v1/usage", "to", "", false},
      {"/v1/usage", "tenant", "usage", false},
      {"/v1/usage", "allocation", "", true},
      {"/v1/events", "since", "", false},
      {"/v1/events", "limit", "", false},
      {"/v1/events", "node", "", true},
      {"/v1/events/stream", "since", "", false},
      {"/v1/events/stream", "node", "", true},
      {validations, "limit", "", false},
      {validations, "marker", "validations", false},
      {"/v1/audit", "since", "", false},
      {"/v1/audit", "limit", "", false},
      {"/v1/availability", "window", "", false},
      {"/v1/availability", "profile", "", true},
  };
}

// Routes that take no query parameter: any one is 400 naming it.
const std::vector<std::string> kNoParamRoutes = {"/v1/images", "/v1/hosts",    "/v1/tenants", "/v1/tokens",
                                                 "/v1/conductors", "/v1/profiles", "/v1/whoami"};

// Routes that name one row in their path ({} is the name).
const std::vector<std::string> kNamedRoutes = {
    "/v1/nodes/{}",    "/v1/nodes/{}/validations", "/v1/nodes/{}/inventory", "/v1/ports/{}",
    "/v1/allocations/{}", "/v1/images/{}",         "/v1/tenants/{}",         "/v1/profiles/{}",
    "/v1/hosts/{}",    "/v1/validations/{}"};

json parse(const TestResponse& r) { return json::parse(r.body, nullptr, false); }

std::string first_field(const TestResponse& r) {
  json j = parse(r);
  if (!j.is_object() || !j.contains("errors") || !j["errors"].is_array() || j["errors"].empty()) return "<none>";
  return j["errors"][0].value("field", "<none>");
}

json call(HttpTestClient& c, const std::string& method, const std::string& target, const json& body, int expect,
          const std::string& token = kToken) {
  auto r = c.request(method, target, body.is_null() ? "" : body.dump(), bearer(token));
  INFO(method << " " << target << " -> " << r.status << " " << r.body);
  REQUIRE(r.status == expect);
  return r.body.empty() ? json() : json::parse(r.body);
}

// What the lab holds, to check nothing was lost or widened.
struct Seeded {
  std::string acme_node;    // flt-a: tenant acme, profile cpu-lab, one port
  std::string globex_node;  // flt-b: tenant globex
  std::string tenant_token; // acme's
  std::size_t nodes = 0, ports = 0, tenants = 0, allocations = 0;
};

Seeded seed(HttpTestClient& c, const std::string& images) {
  Seeded s;
  call(c, "POST", "/v1/images", {{"name", "demo-os"}, {"kind", "os"}, {"format", "raw"},
                                 {"source", images + "/demo.img"}, {"public", true}, {"size", 4096},
                                 // sha256 of 4096 zero bytes
                                 {"sha256", "ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7"}},
       201);
  call(c, "POST", "/v1/tenants",
       {{"name", "acme"},
        {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"max_nodes", 4}}})}}, 201);
  call(c, "POST", "/v1/tenants", {{"name", "globex"}}, 201);
  s.tenant_token = call(c, "POST", "/v1/tokens", {{"name", "ci"}, {"role", "tenant"}, {"tenant", "acme"}}, 201)["token"];
  const std::vector<std::pair<std::string, std::string>> nodes = {{"flt-a", "acme"}, {"flt-b", "globex"}, {"flt-c", ""}};
  int mac = 1;
  for (const auto& [name, tenant] : nodes) {
    json body = {{"name", name},
                 {"profile", "cpu-lab"},
                 {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}}},
                 {"ports", json::array({{{"address", "52:54:00:00:ff:0" + std::to_string(mac++)}}})}};
    json n = call(c, "POST", "/v1/nodes", body, 201);
    if (!tenant.empty()) {
      auto r = c.request("PATCH", "/v1/nodes/" + name, json{{"tenant", tenant}}.dump(),
                         {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/merge-patch+json"}});
      INFO(r.body);
      REQUIRE(r.status == 200);
    }
    if (name == "flt-a") s.acme_node = n["id"];
    if (name == "flt-b") s.globex_node = n["id"];
  }
  // flt-c goes to the pool, and acme's allocation takes it.
  auto state_is = [&](const std::string& name, const std::string& want) {
    return wait_until([&] { return call(c, "GET", "/v1/nodes/" + name, json(), 200)["provision_state"] == want; },
                      30s, 50ms);
  };
  call(c, "PUT", "/v1/nodes/flt-c/states/provision", {{"target", "manage"}}, 202);
  REQUIRE(state_is("flt-c", "manageable"));
  call(c, "PUT", "/v1/nodes/flt-c/states/provision", {{"target", "provide"}}, 202);
  REQUIRE(state_is("flt-c", "available"));
  call(c, "POST", "/v1/allocations",
       {{"name", "job"}, {"profile", "cpu-lab"}, {"kind", "baremetal"}, {"count", 1}, {"image", "demo-os"},
        {"ssh_keys", json::array({kKey})}},
       202,
       s.tenant_token);
  s.nodes = call(c, "GET", "/v1/nodes", json(), 200)["nodes"].size();
  s.ports = call(c, "GET", "/v1/ports", json(), 200)["ports"].size();
  s.tenants = call(c, "GET", "/v1/tenants", json(), 200)["tenants"].size();
  s.allocations = call(c, "GET", "/v1/allocations", json(), 200)["allocations"].size();
  REQUIRE(s.nodes == 3);
  REQUIRE(s.ports == 3);
  REQUIRE(s.allocations == 1);
  return s;
}

// One hostile request against a parameter's rule.
void check_param(HttpTestClient& c, const Param& p, const Hostile& h, const std::string& token) {
  const std::string target = p.route + "?" + p.name + "=" + encode(h.value);
  TestResponse r = c.request("GET", target, "", bearer(token));
  INFO(p.route << " ?" << p.name << "=<" << h.label << "> -> " << r.status << " " << r.body.substr(0, 400));
  CHECK(r.status != 500);
  if (r.status == 400) {
    CHECK(first_field(r) == p.name);
  } else if (r.status == 404) {
    CHECK(p.not_found_ok);
  } else if (r.status == 200) {
    REQUIRE_FALSE(p.collection.empty());
    json j = parse(r);
    REQUIRE(j.is_object());
    REQUIRE(j.contains(p.collection));
    CHECK(j[p.collection].empty());  // nothing matches literally
  } else {
    FAIL("unexpected status");
  }
}

void attack(HttpTestClient& c, uint16_t port, const Seeded& s, const std::string& engine) {
  INFO("engine " << engine);
  const std::vector<Hostile> values = hostile_values();

  SECTION("every list parameter, as staff") {
    for (const Param& p : list_params(s.acme_node))
      for (const Hostile& h : values) check_param(c, p, h, kToken);
  }

  SECTION("routes without parameters refuse a hostile one, by name") {
    for (const std::string& route : kNoParamRoutes) {
      for (const Hostile& h : values) {
        TestResponse r = c.request("GET", route + "?" + encode(h.value) + "=1", "", bearer(kToken));
        INFO(route << " ?<" << h.label << ">=1 -> " << r.status << " " << r.body.substr(0, 300));
        CHECK(r.status == 400);
      }
    }
  }

  SECTION("names in the path match literally or nothing (404, or 400 naming the path), never the row a prefix names") {
    for (const std::string& route : kNamedRoutes) {
      for (const Hostile& h : values) {
        std::string target = route;
        target.replace(target.find("{}"), 2, encode(h.value));
        TestResponse r = c.request("GET", target, "", bearer(kToken));
        INFO(target.substr(0, 200) << " <" << h.label << "> -> " << r.status << " " << r.body.substr(0, 300));
        // Bytes that are not UTF-8 are refused for the whole path first.
        if (r.status == 400) CHECK(first_field(r) == "path");
        else CHECK(r.status == 404);
      }
    }
    // flt-a exists: "flt-a" + NUL + anything is another name (PostgreSQL
    // would have been sent just "flt-a").
    for (const std::string& suffix : {std::string("%00"), std::string("%00x"), std::string("%00%27%20OR%201=1")}) {
      TestResponse r = c.request("GET", "/v1/nodes/flt-a" + suffix, "", bearer(kToken));
      INFO("/v1/nodes/flt-a" << suffix << " -> " << r.status << " " << r.body.substr(0, 300));
      CHECK(r.status == 404);
    }
  }

  SECTION("a query past the header limit is refused whole, not a 500") {
    const std::string huge(100 * 1024, 'A');
    for (const std::string& route : {std::string("/v1/nodes?tenant="), std::string("/v1/usage?tenant=")}) {
      HttpTestClient fresh("127.0.0.1", port);
      TestResponse r = fresh.request("GET", route + huge, "", bearer(kToken));
      INFO(route << "<100 KiB> -> " << r.status);
      CHECK(r.status >= 400);
      CHECK(r.status < 500);
    }
  }

  SECTION("a tenant's filters cannot widen its view") {
    const std::string t = s.tenant_token;
    for (const Param& p : list_params(s.acme_node)) {
      if (p.route == "/v1/audit" || p.route == "/v1/ports") continue;  // staff and admin only
      for (const Hostile& h : values) {
        const std::string target = p.route + "?" + p.name + "=" + encode(h.value);
        TestResponse r = c.request("GET", target, "", bearer(t));
        INFO("tenant " << p.route << " ?" << p.name << "=<" << h.label << "> -> " << r.status << " "
                       << r.body.substr(0, 300));
        CHECK(r.status != 500);
        if (r.status != 200 || p.collection.empty()) continue;
        json j = parse(r);
        REQUIRE(j.contains(p.collection));
        CHECK(j[p.collection].empty());
      }
    }
    // Naming the other tenant: nothing of it, or the 404 of a missing tenant.
    auto nodes = c.request("GET", "/v1/nodes?tenant=globex", "", bearer(t));
    REQUIRE(nodes.status == 200);
    CHECK(parse(nodes)["nodes"].empty());
    CHECK(c.request("GET", "/v1/allocations?tenant=globex", "", bearer(t)).status == 404);
    CHECK(c.request("GET", "/v1/usage?tenant=globex", "", bearer(t)).status == 404);
    CHECK(c.request("GET", "/v1/events?node=" + s.globex_node, "", bearer(t)).status == 404);
    CHECK(c.request("GET", "/v1/events?node=flt-b", "", bearer(t)).status == 404);
    // Its own view, whatever else it tries: its nodes (flt-a, and flt-c once
    // its allocation claims it), never globex's; its one allocation.
    auto own = c.request("GET", "/v1/nodes?tenant=acme", "", bearer(t));
    REQUIRE(own.status == 200);
    std::set<std::string> own_ids;
    const json own_body = parse(own);  // named: a loop over a temporary's member would dangle
    for (const json& n : own_body["nodes"]) own_ids.insert(n["id"].get<std::string>());
    CHECK(own_ids.count(s.acme_node) == 1);
    CHECK(own_ids.count(s.globex_node) == 0);
    auto all = c.request("GET", "/v1/nodes", "", bearer(t));
    REQUIRE(all.status == 200);
    const json all_body = parse(all);
    for (const json& n : all_body["nodes"]) CHECK(n["id"] != s.globex_node);
    auto allocs = c.request("GET", "/v1/allocations", "", bearer(t));
    REQUIRE(allocs.status == 200);
    CHECK(parse(allocs)["allocations"].size() == 1);
  }

  // Whatever ran above: every row is still there.
  CHECK(call(c, "GET", "/v1/nodes", json(), 200)["nodes"].size() == s.nodes);
  CHECK(call(c, "GET", "/v1/ports", json(), 200)["ports"].size() == s.ports);
  CHECK(call(c, "GET", "/v1/tenants", json(), 200)["tenants"].size() == s.tenants);
  CHECK(call(c, "GET", "/v1/allocations", json(), 200)["allocations"].size() == s.allocations);
  CHECK(c.request("GET", "/readyz").status == 200);
}

// One kilnd (and its data) for all of a test case's sections.
struct Lab {
  explicit Lab(std::vector<std::string> extra) {
    images = dir.path() + "/img";
    std::filesystem::create_directories(images);
    { std::ofstream(images + "/demo.img") << std::string(4096, '\0'); }
    std::vector<std::string> flags = {"--bootstrap-token", kToken, "--image-dir", images, "--power-sync-interval", "0"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    kilnd = std::make_unique<KilndProcess>(dir.path() + "/data", flags);
    kilnd->start(true, 60s);
    client = std::make_unique<HttpTestClient>("127.0.0.1", kilnd->port());
    seeded = seed(*client, images);
  }
  TempDir dir;
  std::string images;
  std::unique_ptr<KilndProcess> kilnd;
  std::unique_ptr<HttpTestClient> client;
  Seeded seeded;
};

}  // namespace

TEST_CASE("list filters on SQLite: hostile values match literally or are refused by name") {
  static std::unique_ptr<Lab> lab;  // one kilnd for every section
  if (!lab) lab = std::make_unique<Lab>(std::vector<std::string>{});
  attack(*lab->client, lab->kilnd->port(), lab->seeded, "sqlite");
}

TEST_CASE("list filters on PostgreSQL: hostile values match literally or are refused by name, never truncated") {
  if (auto missing = PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  static std::unique_ptr<PostgresServer> pg;
  static std::unique_ptr<Lab> lab;
  if (!lab) {
    pg = std::make_unique<PostgresServer>();
    pg->create_database("filters");
    lab = std::make_unique<Lab>(std::vector<std::string>{"--database", pg->url("filters")});
  }
  attack(*lab->client, lab->kilnd->port(), lab->seeded, "postgresql");
}
