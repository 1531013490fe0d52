// /v1/allocations and /v1/usage through Api::handle() on a real SQLite store,
// with the real conductor and allocation engine driving fake-driver nodes
// (api_harness.h).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/ids.h"
#include "controller/api/profile_input.h"
#include "controller/model/event_types.h"
#include "tests/support/wait_until.h"
#include "tests/unit/api/api_harness.h"
#include "tests/unit/api/tenant_fixtures.h"

using namespace kiln;
using namespace kiln::test;
using json = nlohmann::json;
using V = http::bhttp::verb;

namespace {

// The default profiles, and two ready images: "ubuntu" (public) and "secret-os".
void seed(ApiHarness& h) {
  seed_profiles(h);
  add_ready_image(h, "ubuntu");
  add_ready_image(h, "secret-os", false);
}

// An RSA public key of 1024 bits.
const char* const kSmallRsa =
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC6t8NfIIfd0rfmUYFm09RbcnUKJj9nL3d7rEUrGwIEaHyCQ2DdaLqHiegv3a0FMqm"
    "5tbCnkm2PHNQcwF2SEDrN7g2bhB1/hT2sQSYyUtbLk6tyZZGePGRyJOZ7CgovsjmvFzYvs3N6tnuRbJSk3ETTs5gSd1DxpbB7xG"
    "ikpULw2w== old@example";

json node(ApiHarness& h, const std::string& id) { return h.call(V::get, "/v1/nodes/" + id, h.admin()).json; }

// The event a lease renewal writes with its change (allocations_routes.cc).
EventDraft lease_event(const std::string& allocation) {
  EventDraft e;
  e.type = event_type::kAllocationLease;
  e.tenant = "acme";
  e.detail = {{"allocation", allocation}};
  return e;
}

}  // namespace

TEST_CASE("allocations: a tenant gets N nodes deployed, uses them, releases them, and is billed", "[allocations]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 2);
  std::string tok = h.make_token("tenant", "acme");
  std::vector<std::string> pool;
  for (int i = 0; i < 3; ++i) pool.push_back(available_node(h, "n" + std::to_string(i)));

  Resp made = h.call_json(V::post, "/v1/allocations", tok, allocation_request(2, {{"name", "train"}, {"lease_seconds", 3600}}));
  INFO(made.body);
  REQUIRE(made.status == 202);
  CHECK(made.json["state"] == "pending");
  CHECK(made.json["tenant"] == "acme");
  CHECK(made.json["kind"] == "baremetal");
  CHECK(made.json["nodes"].size() == 2);
  CHECK(made.json["expires_at"].is_string());
  CHECK(made.header("location") == "/v1/allocations/" + made.json["id"].get<std::string>());
  std::string id = made.json["id"];

  json ready = wait_allocation(h, id, "ready");
  std::vector<std::string> states;
  for (const json& e : ready["history"]) states.push_back(e["to"]);
  CHECK(states == std::vector<std::string>{"pending", "provisioning", "ready"});
  std::set<std::string> members;
  for (const json& n : ready["nodes"]) {
    CHECK(n["state"] == "active");
    members.insert(n["id"]);
    json full = node(h, n["id"]);
    CHECK(full["tenant"] == "acme");
    CHECK(full["allocation"] == id);
  }
  CHECK(members.size() == 2);
  // By name too, for its own tenant.
  CHECK(h.call(V::get, "/v1/allocations/train", tok).json["id"] == id);

  // Billing runs from ready: one open row per member.
  Resp usage = h.call(V::get, "/v1/usage", tok);
  REQUIRE(usage.status == 200);
  REQUIRE(usage.json["usage"].size() == 2);
  for (const json& row : usage.json["usage"]) {
    CHECK(row["ended_at"].is_null());
    CHECK(row["price_micros_per_second"] == 10);  // cpu-lab: 0.00001 per second
    CHECK(row["tenant"] == "acme");
    CHECK(row["kind"] == "baremetal");
  }

  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  Resp gone = h.call(V::delete_, "/v1/allocations/" + id, tok);
  INFO(gone.body);
  REQUIRE(gone.status == 202);
  CHECK(gone.json["state"] == "releasing");
  json released = wait_allocation(h, id, "released");
  CHECK(released["nodes"].empty());
  CHECK(released["former_nodes"].size() == 2);
  for (const std::string& n : members) {
    json after = h.wait_state(n, "available");
    CHECK(after["tenant"].is_null());
    CHECK(after["allocation"].is_null());
  }
  // Released again: the same answer, nothing moves.
  CHECK(h.call(V::delete_, "/v1/allocations/" + id, tok).json["state"] == "released");

  Resp billed = h.call(V::get, "/v1/usage", tok);
  REQUIRE(billed.json["usage"].size() == 2);
  int64_t total = 0;
  for (const json& row : billed.json["usage"]) {
    CHECK(row["ended_at"].is_string());
    CHECK(row["seconds"].get<int64_t>() >= 1);
    CHECK(row["cost_micros"] == row["seconds"].get<int64_t>() * 10);
    total += row["cost_micros"].get<int64_t>();
  }
  CHECK(billed.json["totals"]["cost_micros"] == total);
  CHECK(billed.json["totals"]["allocations"][id]["cost_micros"] == total);

  // The released name can be used again.
  Resp again = h.call_json(V::post, "/v1/allocations", tok, allocation_request(1, {{"name", "train"}}));
  CHECK(again.status == 202);
}

TEST_CASE("allocations: bad requests name the field and reserve nothing", "[allocations]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 2);
  std::string tok = h.make_token("tenant", "acme");
  available_node(h, "n0");

  auto post = [&](const json& body) { return h.call_json(V::post, "/v1/allocations", tok, body); };
  CHECK(post(allocation_request(1, {{"ssh_keys", json::array({"ssh-ed25519 bm90IGEga2V5"})}})).field() == "/ssh_keys/0");
  CHECK(post(allocation_request(1, {{"ssh_keys", json::array({kTenantKey, "ssh-dss AAAA x"})}})).field() == "/ssh_keys/1");
  CHECK(post(allocation_request(1, {{"ssh_keys", json::array({kSmallRsa})}})).field() == "/ssh_keys/0");
  CHECK(post(allocation_request(1, {{"ssh_keys", json::array({std::string("command=\"x\" ") + kTenantKey})}})).field() ==
        "/ssh_keys/0");
  CHECK(post(allocation_request(1, {{"ssh_keys", json::array()}})).field() == "/ssh_keys");
  CHECK(post(allocation_request(0)).field() == "/count");
  CHECK(post(allocation_request(1, {{"count", "2"}})).field() == "/count");
  CHECK(post(allocation_request(1, {{"profile", "nope"}})).field() == "/profile");
  CHECK(post(allocation_request(1, {{"kind", "container"}})).field() == "/kind");
  CHECK(post(allocation_request(1, {{"image", "secret-os"}})).field() == "/image");  // private: unknown to a tenant
  CHECK(post(allocation_request(1, {{"image", "ghost"}})).field() == "/image");
  CHECK(post(allocation_request(1, {{"lease_seconds", 5}})).field() == "/lease_seconds");
  CHECK(post(allocation_request(1, {{"name", "Bad Name"}})).field() == "/name");
  CHECK(post(allocation_request(1, {{"colour", "red"}})).field() == "/colour");
  Resp other = post(allocation_request(1, {{"tenant", "someone-else"}}));
  CHECK(other.status == 403);
  CHECK(other.field() == "/tenant");
  // Staff must say for whom.
  CHECK(h.call_json(V::post, "/v1/allocations", h.admin(), allocation_request(1)).field() == "/tenant");
  CHECK(h.call_json(V::post, "/v1/allocations", h.admin(), allocation_request(1, {{"tenant", "ghost"}})).field() == "/tenant");

  Resp over = post(allocation_request(3));
  CHECK(over.status == 403);
  CHECK(over.has_field("/count", "quota for cpu-lab baremetal is 2, 0 in use"));
  Resp short_pool = post(allocation_request(2));
  CHECK(short_pool.status == 409);
  CHECK(short_pool.has_field("/count", "2 requested, 1 available"));

  Resp list = h.call(V::get, "/v1/allocations", h.admin());
  CHECK(list.json["allocations"].empty());
  json n0 = node(h, "n0");
  CHECK(n0["tenant"].is_null());
  CHECK(n0["provision_state"] == "available");
}

TEST_CASE("allocations: 20 concurrent requests never share a node, and refused ones reserve nothing",
          "[allocations][concurrency]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 1000);
  std::string tok = h.make_token("tenant", "acme");
  for (int i = 0; i < 9; ++i) available_node(h, "n" + std::to_string(i), {{"step_delay_ms", 200}});

  std::atomic<int> accepted{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 20; ++i)
    threads.emplace_back([&, i] {
      Resp r = h.call_json(V::post, "/v1/allocations", tok, allocation_request(2, {{"name", "r" + std::to_string(i)}}));
      if (r.status == 202) accepted++;
      else if (r.status == 409 && r.field() == "/count") refused++;
    });
  for (std::thread& t : threads) t.join();
  CHECK(accepted == 4);  // 9 nodes, 2 each: four requests fit, the fifth cannot
  CHECK(refused == 16);

  Resp list = h.call(V::get, "/v1/allocations", h.admin());
  REQUIRE(list.json["allocations"].size() == 4);
  std::set<std::string> seen;
  for (const json& a : list.json["allocations"]) {
    REQUIRE(a["nodes"].size() == 2);
    for (const json& n : a["nodes"]) CHECK(seen.insert(n["id"].get<std::string>()).second);
  }
  int unclaimed = 0;
  const json all_nodes = h.call(V::get, "/v1/nodes", h.admin()).json["nodes"];
  for (const json& n : all_nodes)
    if (n["allocation"].is_null() && n["tenant"].is_null()) ++unclaimed;
  CHECK(unclaimed == 1);
}

TEST_CASE("allocations: the quota holds under concurrent requests", "[allocations][concurrency]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 3);
  std::string tok = h.make_token("tenant", "acme");
  for (int i = 0; i < 8; ++i) available_node(h, "n" + std::to_string(i), {{"step_delay_ms", 200}});
  std::atomic<int> accepted{0};
  std::atomic<int> over_quota{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      Resp r = h.call_json(V::post, "/v1/allocations", tok, allocation_request(1));
      if (r.status == 202) accepted++;
      else if (r.status == 403 && r.field() == "/count") over_quota++;
    });
  for (std::thread& t : threads) t.join();
  CHECK(accepted == 3);
  CHECK(over_quota == 5);
  Resp t = h.call(V::get, "/v1/tenants/acme", tok);
  CHECK(t.json["quotas"][0]["in_use"] == 3);
}

TEST_CASE("allocations: a member quarantined by the gate is replaced from the pool", "[allocations][replace]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 5);
  std::string tok = h.make_token("tenant", "acme");
  // Claims go oldest first. Burn-in passes; then its gpu_inventory check
  // fails (cpu-lab's quick plan names it), so the pre-hand-off gate
  // quarantines it.
  std::string bad = available_node(h, "bad", {{"validation_script", json::array({"pass", "missing_gpu"})}});
  available_node(h, "good1");
  available_node(h, "spare");
  Resp made = h.call_json(V::post, "/v1/allocations", tok, allocation_request(2));
  REQUIRE(made.status == 202);
  json ready = wait_allocation(h, made.json["id"], "ready");
  CHECK(ready["replacements"] == 1);
  REQUIRE(ready["former_nodes"].size() == 1);
  CHECK(ready["former_nodes"][0]["id"] == bad);
  CHECK(ready["former_nodes"][0]["reason"].get<std::string>().find("quarantined") != std::string::npos);
  json b = node(h, bad);
  CHECK(b["provision_state"] == "quarantined");  // out of the pool, for an operator
  CHECK(b["tenant"].is_null());
  for (const json& n : ready["nodes"]) CHECK(n["id"] != bad);
}

TEST_CASE("allocations: a member that fails to deploy is replaced and cleaned back to the pool",
          "[allocations][replace]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 5);
  std::string tok = h.make_token("tenant", "acme");
  // Claims go oldest first: bad and good1 are taken, the spare stays in the pool.
  std::string bad = available_node(h, "bad", {{"fail", json::array({"deploy"})}});
  std::string good1 = available_node(h, "good1");
  std::string spare = available_node(h, "spare");
  Resp made = h.call_json(V::post, "/v1/allocations", tok, allocation_request(2));
  REQUIRE(made.status == 202);
  // What the request claimed, as its answer says (the members deploy at
  // once, so by the time the test could look at the spare, the failed
  // deploy may already have been replaced by it).
  auto ids = [](const json& nodes) {
    std::set<std::string> out;
    for (const json& n : nodes) out.insert(n["id"].get<std::string>());
    return out;
  };
  CHECK(ids(made.json["nodes"]) == std::set<std::string>{bad, good1});
  json ready = wait_allocation(h, made.json["id"], "ready");
  CHECK(ready["replacements"] == 1);
  REQUIRE(ready["former_nodes"].size() == 1);
  CHECK(ready["former_nodes"][0]["id"] == bad);
  CHECK(ids(ready["nodes"]) == std::set<std::string>{good1, spare});  // the spare took its place
  json b = h.wait_state(bad, "available", std::chrono::seconds(30));  // undeployed: cleaned, back in the pool
  CHECK(b["tenant"].is_null());
}

TEST_CASE("allocations: with nothing to replace a failed member the allocation fails and gives everything back",
          "[allocations][replace]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 5);
  std::string tok = h.make_token("tenant", "acme");
  std::string bad = available_node(h, "bad", {{"fail", json::array({"deploy"})}});
  std::string good = available_node(h, "good");
  Resp made = h.call_json(V::post, "/v1/allocations", tok, allocation_request(2));
  REQUIRE(made.status == 202);
  std::string id = made.json["id"];
  json failed = wait_allocation(h, id, "failed");
  CHECK(failed["last_error"].get<std::string>().find("no replacement") != std::string::npos);
  // Every member leaves: nothing half-allocated.
  REQUIRE(kiln::testing::wait_until([&] {
    json a = h.call(V::get, "/v1/allocations/" + id, tok).json;
    return a["nodes"].empty();
  }, std::chrono::seconds(20)));
  json g = h.wait_state(good, "available");
  CHECK(g["tenant"].is_null());
  json b = node(h, bad);
  CHECK(b["tenant"].is_null());
  // A failed allocation does not count against the quota and can be deleted.
  CHECK(h.call(V::get, "/v1/tenants/acme", tok).json["quotas"][0]["in_use"] == 0);
  CHECK(h.call(V::delete_, "/v1/allocations/" + id, tok).status == 202);
  wait_allocation(h, id, "released");
}

TEST_CASE("allocations: an expired lease is reaped, and a renewed one is not", "[allocations][lease]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 5);
  std::string tok = h.make_token("tenant", "acme");
  for (int i = 0; i < 2; ++i) available_node(h, "n" + std::to_string(i));
  std::string a = h.call_json(V::post, "/v1/allocations", tok, allocation_request(1, {{"lease_seconds", 60}})).json["id"];
  std::string b = h.call_json(V::post, "/v1/allocations", tok, allocation_request(1, {{"lease_seconds", 60}})).json["id"];
  wait_allocation(h, a, "ready");
  wait_allocation(h, b, "ready");
  // b is renewed for an hour; a's lease is then moved into the past (as if
  // 60 s had gone by) in the store.
  Resp renewed = h.call_json(V::put, "/v1/allocations/" + b + "/lease", tok, {{"lease_seconds", 3600}});
  REQUIRE(renewed.status == 200);
  CHECK(renewed.json["lease_seconds"] == 3600);
  CHECK(h.call_json(V::put, "/v1/allocations/" + b + "/lease", tok, {{"lease_seconds", 1}}).field() ==
        "/lease_seconds");
  // Written with the event a renewal writes, which names the allocation:
  // the engine reads it again and finds the lease over.
  REQUIRE(h.store().update_allocation_if(a, std::nullopt, [](Allocation& x) {
    x.expires_at = 1000;
    return ok_status();
  }, {lease_event(a)}));
  json reaped = wait_allocation(h, a, "released");
  bool said = false;
  for (const json& e : reaped["history"])
    if (e.contains("reason") && e["reason"].get<std::string>().find("lease expired") != std::string::npos) said = true;
  CHECK(said);
  CHECK(h.call(V::get, "/v1/allocations/" + b, tok).json["state"] == "ready");
  // A released allocation's lease cannot be renewed.
  CHECK(h.call_json(V::put, "/v1/allocations/" + a + "/lease", tok, {{"lease_seconds", 3600}}).status == 409);
}

TEST_CASE("allocations: another tenant's allocation, usage and events are a 404 or absent", "[allocations][isolation]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 5);
  make_tenant(h, "globex", 5);
  std::string acme = h.make_token("tenant", "acme");
  std::string globex = h.make_token("tenant", "globex");
  available_node(h, "n0");
  Resp made = h.call_json(V::post, "/v1/allocations", acme, allocation_request(1, {{"name", "mine"}}));
  REQUIRE(made.status == 202);
  std::string id = made.json["id"];
  wait_allocation(h, id, "ready");

  for (const std::string& ref : {id, std::string("mine")}) {
    CHECK(h.call(V::get, "/v1/allocations/" + ref, globex).status == 404);
    CHECK(h.call(V::delete_, "/v1/allocations/" + ref, globex).status == 404);
    CHECK(h.call_json(V::put, "/v1/allocations/" + ref + "/lease", globex, {{"lease_seconds", 3600}}).status == 404);
  }
  CHECK(h.call(V::get, "/v1/allocations", globex).json["allocations"].empty());
  CHECK(h.call(V::get, "/v1/allocations?tenant=acme", globex).status == 404);
  CHECK(h.call(V::get, "/v1/usage", globex).json["usage"].empty());
  CHECK(h.call(V::get, "/v1/usage?tenant=acme", globex).status == 404);
  CHECK(h.call(V::get, "/v1/usage?allocation=" + id, globex).status == 404);
  const json globex_events = h.call(V::get, "/v1/events", globex).json["events"];
  for (const json& e : globex_events) CHECK(e["tenant"] != "acme");
  bool acme_sees = false;
  const json acme_events = h.call(V::get, "/v1/events", acme).json["events"];
  for (const json& e : acme_events)
    if (e["type"] == "allocation.transition") acme_sees = true;
  CHECK(acme_sees);
  // Still there and untouched for its owner.
  CHECK(h.call(V::get, "/v1/allocations/" + id, acme).json["state"] == "ready");
}

TEST_CASE("allocations: the list shows each allocation and its member nodes as the allocation's own GET does",
          "[allocations]") {
  // The list reads every listed allocation's member nodes together; each
  // item must still be that allocation's own answer, with its own nodes.
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 5);
  make_tenant(h, "globex", 5);
  std::string acme = h.make_token("tenant", "acme");
  std::string globex = h.make_token("tenant", "globex");
  for (int i = 0; i < 6; ++i) available_node(h, "n" + std::to_string(i));
  std::vector<std::string> ids;
  for (auto [tok, count] : std::vector<std::pair<std::string, int>>{{acme, 2}, {globex, 1}, {acme, 3}}) {
    Resp made = h.call_json(V::post, "/v1/allocations", tok, allocation_request(count));
    REQUIRE(made.status == 202);
    ids.push_back(made.json["id"]);
  }
  for (const std::string& id : ids) wait_allocation(h, id, "ready");

  auto check_list = [&](const std::string& tok, const std::set<std::string>& expect) {
    Resp list = h.call(V::get, "/v1/allocations", tok);
    REQUIRE(list.status == 200);
    std::set<std::string> listed;
    for (const json& item : list.json["allocations"]) {
      listed.insert(item["id"].get<std::string>());
      Resp own = h.call(V::get, "/v1/allocations/" + item["id"].get<std::string>(), tok);
      REQUIRE(own.status == 200);
      CHECK(item == own.json);
      CHECK(item["nodes"].size() == item["count"]);
      for (const json& n : item["nodes"]) CHECK(n["state"] == "active");
    }
    CHECK(listed == expect);
  };
  check_list(h.admin(), {ids.begin(), ids.end()});
  check_list(acme, {ids[0], ids[2]});
  check_list(globex, {ids[1]});
}

TEST_CASE("allocations: a 10,000-deep body, invalid UTF-8 and no token are refused and store nothing",
          "[allocations][security]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 2);
  std::string tok = h.make_token("tenant", "acme");
  available_node(h, "n0");
  std::string deep = "{\"traits\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
  Resp d = h.call(V::post, "/v1/allocations", tok, deep);
  CHECK(d.status == 400);
  CHECK(d.field().rfind("/traits/0/0", 0) == 0);
  Resp u = h.call(V::post, "/v1/allocations", tok, "{\"name\":\"\xff\xfe\",\"count\":1}");
  CHECK(u.status == 400);
  Resp l = h.call(V::put, "/v1/allocations/x/lease", tok, "{\"lease_seconds\":" + std::string(10000, '[') + "}");
  CHECK(l.status == 400);
  CHECK(h.call_json(V::post, "/v1/allocations", "", allocation_request(1)).status == 401);
  CHECK(h.call(V::get, "/v1/usage", "").status == 401);
  CHECK(h.call(V::get, "/v1/allocations", h.admin()).json["allocations"].empty());
  CHECK(node(h, "n0")["tenant"].is_null());
}

TEST_CASE("allocations: a virtual request books guests on the hosts, all or nothing, and availability counts the room",
          "[allocations][virtual]") {
  ApiHarness h;
  seed(h);
  Profile p;
  p.name = "vm-six";
  p.doc = {{"name", "vm-six"},
           {"plans", {{"quick", json::array()}, {"full", json::array()}}},
           {"virtual", {{"vcpus", 6}, {"memory_mib", 128}, {"gpus", 0}, {"disk_gib", 1}, {"hugepages", false},
                        {"numa_pin", false}}}};
  REQUIRE(h.store().create_profile(p));
  Resp t = h.call_json(V::post, "/v1/tenants", h.admin(),
                       {{"name", "acme"},
                        {"quotas", json::array({{{"profile", "vm-six"}, {"kind", "virtual"}, {"max_nodes", 10}}})}});
  REQUIRE(t.status == 201);
  std::string tok = h.make_token("tenant", "acme");
  // test:///default: 16 CPUs at a 1.0 allocation ratio, so two 6-vCPU guests.
  Resp host = h.call_json(V::post, "/v1/hosts", h.admin(), {{"name", "hv"}, {"uri", "test:///default"}});
  REQUIRE(host.status == 201);
  REQUIRE(kiln::testing::wait_until([&] {
    return h.call(V::get, "/v1/hosts/hv", h.admin()).json["status"] == "ready";
  }, std::chrono::seconds(10), std::chrono::milliseconds(20)));

  Resp avail = h.call(V::get, "/v1/availability?profile=vm-six", tok);
  INFO(avail.body);
  REQUIRE(avail.status == 200);
  CHECK(avail.json["availability"][0]["kinds"]["virtual"]["free"] == 2);

  json ask = {{"profile", "vm-six"}, {"kind", "virtual"}, {"count", 3}, {"image", "ubuntu"},
              {"ssh_keys", json::array({kTenantKey})}};
  Resp three = h.call_json(V::post, "/v1/allocations", tok, ask);
  INFO(three.body);
  REQUIRE(three.status == 409);
  CHECK(three.json["errors"][0]["field"] == "/count");
  CHECK(three.json["errors"][0]["message"] ==
        "3 requested, 2 available (no host has room for this node: host hv: needs 6 vcpus, 4 free)");
  CHECK(h.call(V::get, "/v1/nodes", h.admin()).json["nodes"].empty());

  ask["count"] = 2;
  Resp two = h.call_json(V::post, "/v1/allocations", tok, ask);
  INFO(two.body);
  REQUIRE(two.status == 202);
  CHECK(two.json["kind"] == "virtual");
  REQUIRE(two.json["nodes"].size() == 2);
  for (const json& m : two.json["nodes"]) {
    json n = node(h, m["id"]);
    CHECK(n["kind"] == "virtual");
    CHECK(n["tenant"] == "acme");
  }
}

TEST_CASE("allocations: a virtual member's NoCloud seed carries the allocation's keys and the tenant's user data",
          "[allocations][virtual]") {
  ApiHarness h;
  seed(h);
  Resp t = h.call_json(V::post, "/v1/tenants", h.admin(),
                       {{"name", "acme"},
                        {"quotas", json::array({{{"profile", "cpu-lab"}, {"kind", "virtual"}, {"max_nodes", 1}}})}});
  REQUIRE(t.status == 201);
  std::string tok = h.make_token("tenant", "acme");
  // A virtual node an operator enrolled with a BMC of its own (no guest to
  // book); its deploy takes 10 s, time to read the seed while it deploys.
  Node n;
  n.id = new_uuid();
  n.name = "vm-fake";
  n.kind = NodeKind::kVirtual;
  n.profile = "cpu-lab";
  n.provision_state = ProvisionState::kAvailable;
  n.bmc.driver = "fake";
  n.bmc.address = "bmc-vm-fake";
  n.bmc.options = {{"step_delay_ms", 10000}};
  EventDraft e;
  e.type = "node.created";
  REQUIRE(h.store().create_node(n, e));
  // The guest's NIC; DHCP leases it to the machine the test's calls come from
  // only once the guest runs.
  REQUIRE(h.call_json(V::post, "/v1/ports", h.admin(), {{"node", n.id}, {"address", "52:54:00:5e:ed:01"}}).status == 201);
  // Before it is the tenant's, nothing is served for it.
  CHECK(h.call(V::get, "/v1/nocloud/" + n.id + "/user-data", "").status == 404);

  json ask = {{"profile", "cpu-lab"}, {"kind", "virtual"}, {"count", 1}, {"image", "ubuntu"},
              {"ssh_keys", json::array({kTenantKey})},
              {"user_data", "#cloud-config\nruncmd: [[touch, /etc/tenant-was-here]]\n"}};
  Resp made = h.call_json(V::post, "/v1/allocations", tok, ask);
  INFO(made.body);
  REQUIRE(made.status == 202);
  const bool deploying = kiln::testing::wait_until([&] { return node(h, n.id)["provision_state"] == "deploying"; },
                                                    std::chrono::seconds(5), std::chrono::milliseconds(20));
  INFO(h.log().all());
  REQUIRE(deploying);
  // Deploying, but the caller does not hold the guest's lease: the seed (its
  // os secret, the tenant's keys) is not served.
  CHECK(h.call(V::get, "/v1/nocloud/" + n.id + "/user-data", "").status == 404);
  CHECK(h.call(V::get, "/v1/nocloud/" + n.id + "/kiln-agent.env", "").status == 404);
  h.lease_to_caller("52:54:00:5e:ed:01");
  Resp seed_doc = h.call(V::get, "/v1/nocloud/" + n.id + "/user-data", "");
  INFO(seed_doc.body);
  REQUIRE(seed_doc.status == 200);
  const std::string& y = seed_doc.body;
  const std::size_t at = y.find(std::string("  - \"") + kTenantKey + "\"");
  CHECK(at != std::string::npos);
  CHECK(at < y.find("write_files:"));                    // under ssh_authorized_keys
  CHECK(y.find(kTenantKey, at + std::strlen(kTenantKey)) == std::string::npos);  // once
  // The tenant's user data as on a config drive: their part first, then ours,
  // appended to their lists (config_drive.h, "Combining user data").
  CHECK(y.rfind("Content-Type: multipart/mixed;", 0) == 0);
  const std::size_t theirs = y.find("runcmd: [[touch, /etc/tenant-was-here]]");
  CHECK(theirs != std::string::npos);
  CHECK(theirs < at);
  CHECK(y.find("merge_how: 'list(append)+dict(no_replace,recurse_list)+str()'") != std::string::npos);
}

// The engine is started by events and deadlines, never by a loop looking
// for work (allocation_engine.h, "Which allocations it looks at"). Each
// batch (passes()) begins with one store hop, so a batch not made is a store
// call not made. The harness's
// interval is 50 ms: the engine as it was (a pass every interval, and a
// 20 ms poll of the kick flag) made about 10 passes in each 500 ms below.
TEST_CASE("allocation engine: idle with nothing in flight or only settled allocations, woken by a kick and by a lease end",
          "[allocations][engine][idle]") {
  ApiHarness h;
  seed(h);
  make_tenant(h, "acme", 5);
  std::string tok = h.make_token("tenant", "acme");
  for (int i = 0; i < 2; ++i) available_node(h, "n" + std::to_string(i));
  // Whatever the set-up's events started has finished once passes stop moving.
  auto quiet = [&] {
    uint64_t before = h.allocations().passes();
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    return h.allocations().passes() == before;
  };
  REQUIRE(kiln::testing::wait_until(quiet, std::chrono::seconds(10), std::chrono::milliseconds(0)));

  // Nothing in flight: no pass at all.
  uint64_t idle = h.allocations().passes();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(h.allocations().passes() == idle);

  // A kick runs a pass at once (nothing else would: there is no timer).
  h.allocations().kick();
  REQUIRE(kiln::testing::wait_until([&] { return h.allocations().passes() > idle; }, std::chrono::seconds(5), std::chrono::milliseconds(1)));

  // A ready allocation whose members all serve, without a lease: no pass.
  std::string a = h.call_json(V::post, "/v1/allocations", tok, allocation_request(2)).json["id"];
  wait_allocation(h, a, "ready");
  REQUIRE(kiln::testing::wait_until(quiet, std::chrono::seconds(10), std::chrono::milliseconds(0)));
  uint64_t settled = h.allocations().passes();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK(h.allocations().passes() == settled);

  // A lease end is a deadline the engine sleeps until: written with the
  // event a renewal writes (one batch reads it), then reaped with no further
  // event or kick.
  int64_t soon = kiln::SystemClock().now_ms() + 300;
  REQUIRE(h.store().update_allocation_if(a, std::nullopt, [soon](Allocation& x) {
    x.expires_at = soon;
    return ok_status();
  }, {lease_event(a)}));
  REQUIRE(kiln::testing::wait_until([&] { return h.allocations().passes() > settled; }, std::chrono::seconds(5), std::chrono::milliseconds(1)));
  json reaped = wait_allocation(h, a, "released", std::chrono::seconds(10));
  bool said = false;
  for (const json& e : reaped["history"])
    if (e.contains("reason") && e["reason"].get<std::string>().find("lease expired") != std::string::npos) said = true;
  CHECK(said);
}
