// The tenant isolation matrix: every route the API serves (read from
// Api::routes(), so a new route is in the matrix the day it is added) x
// whose resource it names (the caller's own tenant's, another tenant's, the
// provider's) x read and write, called with a tenant token.
//
// What must hold:
//   - another tenant's and the provider's resources are never answered with
//     2xx, and the answer never carries their ids or names;
//   - nothing of theirs changes (every resource's version is compared before
//     and after the whole matrix);
//   - lists and streams (with every filter naming the other tenant) show
//     none of it;
//   - the caller's own resources can be read (2xx) and written (not 404).
//
// A route whose path parameter has no resolver below, or a route that answers
// without a token and is not in kPublicRoutes, fails the test: extend the
// tables rather than let it go unchecked.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/ids.h"
#include "controller/api/profile_input.h"
#include "tests/support/wait_until.h"
#include "tests/unit/api/api_harness.h"
#include "tests/unit/api/tenant_fixtures.h"
#include "tests/unit/api/sse_capture.h"

using namespace kiln;
using namespace kiln::test;
using json = nlohmann::json;
using V = http::bhttp::verb;

namespace {

// Routes anyone may call without a token, each for a reason: the probes and
// the spec carry no tenant data; the agent and boot routes authenticate the
// machine by its own token, lease or state (docs/agent-protocol.md,
// docs/security.md), not by an API token.
const std::set<std::string> kPublicRoutes = {
    "GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.json",
    "POST /v1/agent/lookup", "POST /v1/agent/heartbeat", "POST /v1/agent/results",
    "GET /boot/{script}", "GET /v1/nocloud/{node}/meta-data", "GET /v1/nocloud/{node}/user-data",
    "GET /v1/nocloud/{node}/vendor-data", "GET /v1/nocloud/{node}/kiln-agent.env",
    "GET /v1/images/{id}/content", "HEAD /v1/images/{id}/content",
    // Ramdisk kernels are fetched by iPXE; any other image's bytes are a 404
    // without credentials, hidden as a missing image is (the matrix of callers
    // x hidden, missing, public images is in tests/unit/boot/image_routes_test.cc).
    "GET /v1/images/{id}/kernel", "HEAD /v1/images/{id}/kernel",
    // cloud-init's phone_home: the deployed OS has no token; the URL's
    // one-time per-deploy token and the node's lease are its credential, and
    // it writes only that node's host keys (phone_home_routes.cc).
    "POST /v1/phone-home/{token}",
};

enum class Owner { kOwn, kOther, kProvider };
const char* owner_name(Owner o) { return o == Owner::kOwn ? "own" : o == Owner::kOther ? "other" : "provider"; }

// One tenant's (or the provider's) resources.
struct Holdings {
  std::string node, node_name, allocation, allocation_name, validation, tenant, image;
  std::string profile;  // profiles are a shared catalogue: only "own" (readable by all) names one
};

bool is_read(V m) { return m == V::get || m == V::head; }

// A body that gets a write past input checking to the ownership check.
json body_for(V method, const std::string& pattern) {
  if (pattern == "/v1/allocations/{id}/lease") return {{"lease_seconds", 3600}};
  if (pattern == "/v1/nodes/{id}/states/power") return {{"target", "off"}};
  if (pattern == "/v1/nodes/{id}/states/provision") return {{"target", "undeploy"}};
  if (pattern == "/v1/nodes/{id}/maintenance") return {{"reason", "matrix"}};
  if (pattern == "/v1/nodes/{id}/validations") return {{"plan", "quick"}};
  if (pattern == "/v1/nodes/{id}" && method == V::patch) return {{"traits", json::array({"x"})}};
  if (pattern == "/v1/tenants/{name}" && method == V::patch) return {{"display_name", "x"}};
  if (pattern == "/v1/images/{id}" && method == V::patch) return {{"public", true}};
  return json::object();
}

// What resolve() answers when the holder has no resource of that kind.
const std::string kNone = "-";

// Fills the pattern's parameters with `h`'s resources; "" when a parameter
// has no resolver.
std::string resolve(const std::string& pattern, const Holdings& h) {
  struct Param {
    const char* prefix;
    const char* placeholder;
    std::string value;
  };
  const Param params[] = {
      {"/v1/nodes/", "{id}", h.node},          {"/v1/allocations/", "{id}", h.allocation},
      {"/v1/validations/", "{id}", h.validation}, {"/v1/tenants/", "{name}", h.tenant},
      {"/v1/images/", "{id}", h.image},        {"/v1/nocloud/", "{node}", h.node},
      // Staff-only resources: a tenant is refused whatever the id.
      {"/v1/hosts/", "{id}", "host-" + h.tenant}, {"/v1/ports/", "{id}", new_uuid()},
      {"/v1/tokens/", "{id}", new_uuid()},     {"/v1/profiles/", "{name}", h.profile},
      {"/boot/", "{script}", "x"},
      // A token of the tenant's own node's (never-minted) deploy: the 404 any
      // token kilnd would not take gets.
      {"/v1/phone-home/", "{token}", h.node.empty() ? "" : h.node + "." + std::string(64, 'a')},
  };
  std::string out = pattern;
  for (const Param& p : params) {
    if (out.rfind(p.prefix, 0) != 0) continue;
    auto at = out.find(p.placeholder);
    if (at == std::string::npos) continue;
    if (p.value.empty()) return kNone;
    out.replace(at, std::string(p.placeholder).size(), p.value);
  }
  return out.find('{') == std::string::npos ? out : "";
}

// The versions of everything `h` holds, as an admin reads them.
std::map<std::string, json> snapshot(ApiHarness& api, const Holdings& h) {
  std::map<std::string, json> out;
  auto keep = [&](const std::string& path) {
    Resp r = api.call(V::get, path, api.admin());
    out[path] = r.status == 200 ? json{{"version", r.json.value("version", json())},
                                       {"state", r.json.value("state", r.json.value("provision_state", json()))},
                                       {"power", r.json.value("target_power_state", json())}}
                                : json(r.status);
  };
  if (!h.node.empty()) keep("/v1/nodes/" + h.node);
  if (!h.allocation.empty()) keep("/v1/allocations/" + h.allocation);
  if (!h.tenant.empty()) keep("/v1/tenants/" + h.tenant);
  if (!h.image.empty()) keep("/v1/images/" + h.image);
  return out;
}

// Whether `body` names one of `h`'s resources that the request itself did
// not name (echoing the id a caller sent, "no such node: <id>", tells it
// nothing).
bool mentions_any(const std::string& body, const Holdings& h, const std::string& request) {
  for (const std::string& s : {h.node, h.node_name, h.allocation, h.allocation_name, h.validation})
    if (!s.empty() && body.find(s) != std::string::npos && request.find(s) == std::string::npos) return true;
  return false;
}

std::string available(ApiHarness& h, const std::string& name) {
  json bmc = {{"driver", "fake"}, {"address", "bmc-" + name}, {"username", "root"}, {"password", "pw"}};
  Resp made = h.call_json(V::post, "/v1/nodes", h.admin(), {{"name", name}, {"profile", "cpu-lab"}, {"bmc", bmc}});
  REQUIRE(made.status == 201);
  std::string id = made.json["id"];
  // Inspected on the way, so its inventory is there to read.
  const std::pair<const char*, const char*> steps[] = {
      {"manage", "manageable"}, {"inspect", "manageable"}, {"provide", "available"}};
  for (const auto& step : steps) {
    REQUIRE(h.call_json(V::put, "/v1/nodes/" + id + "/states/provision", h.admin(), {{"target", step.first}})
                .status == 202);
    h.wait_state(id, step.second);
  }
  return id;
}

// A tenant with one ready allocation of one node, and that node's validation.
Holdings tenant_with_allocation(ApiHarness& h, const std::string& tenant, const std::string& image,
                                std::string& token) {
  REQUIRE(h.call_json(V::post, "/v1/tenants", h.admin(),
                      {{"name", tenant},
                       {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"max_nodes", 5}}})}})
              .status == 201);
  token = h.make_token("tenant", tenant);
  Holdings out;
  out.tenant = tenant;
  out.node_name = tenant + "-node";
  out.node = available(h, out.node_name);
  // Only this node is free while the tenant asks, so the allocation takes it.
  Resp made = h.call_json(V::post, "/v1/allocations", token,
                          {{"name", tenant + "-job"}, {"profile", "cpu-lab"}, {"kind", "baremetal"}, {"count", 1},
                           {"image", image}, {"ssh_keys", json::array({kTenantKey})}});
  INFO(made.body);
  REQUIRE(made.status == 202);
  out.allocation = made.json["id"];
  out.allocation_name = tenant + "-job";
  REQUIRE(kiln::testing::wait_until([&] {
    return h.call(V::get, "/v1/allocations/" + out.allocation, h.admin()).json["state"] == "ready";
  }, std::chrono::seconds(20)));
  Resp vals = h.call(V::get, "/v1/nodes/" + out.node + "/validations", h.admin());
  REQUIRE(vals.status == 200);
  REQUIRE_FALSE(vals.json["validations"].empty());
  out.validation = vals.json["validations"][0]["id"];
  return out;
}

// The matrix's world: acme (the caller) and globex each hold a ready
// allocation of one node; the provider holds a spare node.
struct World {
  Holdings own, other, provider;
  std::string acme_token, globex_token;
};

World make_world(ApiHarness& h) {
  REQUIRE(kiln::api::seed_default_profiles(h.store()));
  std::string public_image, private_image;
  public_image = add_ready_image(h, "ubuntu");
  private_image = add_ready_image(h, "provider-os", false);
  World w;
  w.own = tenant_with_allocation(h, "acme", "ubuntu", w.acme_token);
  w.own.image = public_image;
  w.own.profile = "cpu-lab";
  w.other = tenant_with_allocation(h, "globex", "ubuntu", w.globex_token);
  w.other.image = private_image;  // an image the caller may not see is "other" too
  w.provider.node_name = "spare";
  w.provider.node = available(h, "spare");
  w.provider.tenant = "ghost-tenant";
  w.provider.image = private_image;
  Resp pv = h.call(V::get, "/v1/nodes/" + w.provider.node + "/validations", h.admin());
  if (!pv.json["validations"].empty()) w.provider.validation = pv.json["validations"][0]["id"];
  return w;
}

}  // namespace

TEST_CASE("isolation: every route x own, other tenant's, provider's x read, write", "[isolation][matrix]") {
  ApiHarness h;
  World w = make_world(h);
  Holdings& own = w.own;
  Holdings& other = w.other;
  Holdings& provider = w.provider;
  const std::string& acme_token = w.acme_token;

  const auto before_other = snapshot(h, other);
  const auto before_provider = snapshot(h, provider);

  std::vector<std::pair<std::string, std::string>> routes = h.api().routes();
  REQUIRE(routes.size() > 40);
  // Destructive own-writes last, so the reads of own resources still find them.
  std::stable_sort(routes.begin(), routes.end(), [](const auto& a, const auto& b) {
    return (a.first == "DELETE") < (b.first == "DELETE");
  });

  std::vector<std::string> unresolved, unexpected_public, failures;
  int cells = 0;
  for (const auto& [method_name, pattern] : routes) {
    const std::string route = method_name + " " + pattern;
    V method = http::bhttp::string_to_verb(method_name);
    // Which routes need a token is itself part of the matrix.
    std::string probe = resolve(pattern, own);
    if (probe.empty() || probe == kNone) {
      unresolved.push_back(route);
      continue;
    }
    Resp anonymous = h.call(method, probe, "", is_read(method) ? "" : body_for(method, pattern).dump());
    if (anonymous.status != 401) {
      if (!kPublicRoutes.count(route)) unexpected_public.push_back(route + " -> " + std::to_string(anonymous.status));
      continue;
    }
    for (Owner owner : {Owner::kOther, Owner::kProvider, Owner::kOwn}) {
      const Holdings& target = owner == Owner::kOwn ? own : owner == Owner::kOther ? other : provider;
      std::string path = resolve(pattern, target);
      if (path == kNone) continue;  // the provider has no such resource (no allocation of its own)
      // Collections: filter by the target's tenant too, where the route takes it.
      std::vector<std::string> targets = {path};
      if (pattern == "/v1/nodes" || pattern == "/v1/allocations" || pattern == "/v1/usage")
        targets.push_back(path + "?tenant=" + target.tenant);
      if (pattern == "/v1/events" || pattern == "/v1/events/stream") targets.push_back(path + "?node=" + target.node);
      if (pattern == "/v1/usage") targets.push_back(path + "?allocation=" + target.allocation);
      for (const std::string& t : targets) {
        if (pattern == "/v1/events/stream") continue;  // streamed: "isolation: the SSE stream" below
        ++cells;
        std::string body = is_read(method) ? "" : body_for(method, pattern).dump();
        Resp r = h.call(method, t, acme_token, body);
        std::string cell = route + " [" + owner_name(owner) + "] " + t + " -> " + std::to_string(r.status);
        if (owner == Owner::kOwn) {
          bool collection = pattern.find('{') == std::string::npos;
          if (r.status == 404 && !collection) failures.push_back(cell + ": own resource not found");
          if (is_read(method) && r.status >= 300 && r.status != 403) failures.push_back(cell + ": own read failed " + r.body);
          continue;
        }
        if (r.status >= 200 && r.status < 300 && pattern.find('{') != std::string::npos)
          failures.push_back(cell + ": another's resource answered");
        if (mentions_any(r.body, target, t)) failures.push_back(cell + ": body names another's resource: " + r.body.substr(0, 300));
      }
    }
  }
  INFO("cells: " << cells);
  for (const std::string& u : unresolved) FAIL_CHECK("no resolver for " << u << ": add one to the matrix");
  for (const std::string& p : unexpected_public) FAIL_CHECK("answers without a token: " << p);
  for (const std::string& f : failures) FAIL_CHECK(f);
  CHECK(cells > 100);

  // Nothing of another tenant's or the provider's changed.
  CHECK(snapshot(h, other) == before_other);
  CHECK(snapshot(h, provider) == before_provider);
}

TEST_CASE("isolation: the SSE stream x own, other tenant's, provider's events, replayed and live", "[isolation][stream]") {
  ApiHarness h;
  World w = make_world(h);
  using namespace std::chrono_literals;

  // Filtering by another's node is a 404 that names nothing of theirs.
  for (const Holdings* target : {&w.other, &w.provider}) {
    const std::string t = "/v1/events/stream?since=0&node=" + target->node;
    Resp r = h.call(V::get, t, w.acme_token);
    INFO(t << " -> " << r.status << " " << r.body);
    CHECK(r.status == 404);
    CHECK_FALSE(mentions_any(r.body, *target, t));
  }

  // The tenant's own streams, from the start of the log (a replay of
  // everything that happened to all three) and then live.
  const std::vector<std::string> mine = {"/v1/events/stream?since=0",
                                         "/v1/events/stream?since=0&node=" + w.own.node};
  std::vector<std::unique_ptr<CollectingWriter>> writers;
  std::vector<std::future<void>> done;
  for (const std::string& t : mine) {
    Resp r = h.call(V::get, t, w.acme_token);
    REQUIRE(r.status == 200);
    REQUIRE(r.reply.stream);
    writers.push_back(std::make_unique<CollectingWriter>());
    done.push_back(asio::co_spawn(h.io(), r.reply.stream(*writers.back()), asio::use_future));
  }
  // Live: the others' node and allocation change, then the caller's node
  // does; once that last event is through, everything before it was judged.
  for (const Holdings* target : {&w.other, &w.provider}) {
    REQUIRE(h.call_json(V::put, "/v1/nodes/" + target->node + "/maintenance", h.admin(), {{"reason", "theirs"}})
                .status == 200);
  }
  REQUIRE(h.call_json(V::put, "/v1/allocations/" + w.other.allocation + "/lease", w.globex_token,
                      {{"lease_seconds", 7200}})
              .status == 200);
  REQUIRE(h.call_json(V::put, "/v1/nodes/" + w.own.node + "/maintenance", h.admin(), {{"reason", "mine"}})
              .status == 200);
  auto saw_mine = [](const CollectingWriter& wr) {
    for (const SseEvent& e : parse_sse(wr.text()))
      if (e.type == "node.maintenance_set") return true;
    return false;
  };
  for (const auto& wr : writers) CHECK(kiln::testing::wait_until([&] { return saw_mine(*wr); }, 10s));
  h.api().shutdown();
  for (auto& d : done) REQUIRE(d.wait_for(5s) == std::future_status::ready);

  for (std::size_t i = 0; i < mine.size(); ++i) {
    const std::string text = writers[i]->text();
    INFO(mine[i] << "\n" << text.substr(0, 2000));
    std::vector<SseEvent> got = parse_sse(text);
    CHECK_FALSE(mentions_any(text, w.other, mine[i]));
    CHECK_FALSE(mentions_any(text, w.provider, mine[i]));
    std::set<std::string> types;
    for (const SseEvent& e : got) {
      types.insert(e.type);
      if (!e.data["node"].is_null()) CHECK(e.data["node"] == w.own.node);
    }
    // Not vacuous: the replay carried the caller's own history.
    CHECK(types.count("node.claimed") == 1);
    CHECK(types.count("node.maintenance_set") == 1);
    if (i == 0) CHECK(types.count("allocation.created") == 1);
  }
}
