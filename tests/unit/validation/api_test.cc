// Issue 6 through the API: profiles, the hand-off gate with the fake driver's
// scripted reports, stored reports and who sees them, on-demand runs, and
// availability computed from reports inserted through the store.
#include <catch2/catch.hpp>

#include "controller/api/profile_input.h"
#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;
using V = http::bhttp::verb;

namespace {

json gpu_profile(const std::string& name) {
  return {{"name", name},
          {"description", "test GPUs"},
          {"gpu", {{"count", 8}, {"model", "H100"}}},
          {"thresholds", {{"nccl_busbw_gbps_min", 400}, {"hbm_gbps_min", 2848}}},
          {"price", {{"baremetal_per_second", 0.0066}, {"virtual_per_second", 0.0069}}}};
}

void create_profile(ApiHarness& h, const json& doc) {
  Resp r = h.call_json(V::post, "/v1/profiles", h.admin(), doc);
  INFO(r.body);
  REQUIRE(r.status == 201);
}

// Enrolls a fake node with `profile` and `script`, manages and provides it.
json provide(ApiHarness& h, const std::string& name, const std::string& profile, json script) {
  json extra = json::object();
  if (!profile.empty()) extra["profile"] = profile;
  json bmc = {{"driver", "fake"}, {"address", "bmc-" + name}, {"username", "root"}, {"password", "pw"}};
  if (!script.is_null()) bmc["options"] = {{"validation_script", script}};
  extra["bmc"] = bmc;
  json n = h.enroll(name, extra);
  const std::string id = n["id"];
  auto verb = [&](const char* target) {
    Resp r = h.call_json(V::put, "/v1/nodes/" + id + "/states/provision", h.admin(), {{"target", target}});
    INFO(r.body);
    REQUIRE(r.status == 202);
  };
  verb("manage");
  h.wait_state(id, "manageable");
  verb("provide");
  return n;
}

json validations_of(ApiHarness& h, const std::string& id, const std::string& token) {
  Resp r = h.call(V::get, "/v1/nodes/" + id + "/validations", token);
  INFO(r.body);
  REQUIRE(r.status == 200);
  return r.json["validations"];
}

}  // namespace

TEST_CASE("profiles: CRUD, field errors, roles") {
  ApiHarness h;
  std::string op = h.make_token("operator");
  std::string tenant = h.make_token("tenant", "acme");

  Resp c = h.call_json(V::post, "/v1/profiles", op, gpu_profile("gpu8"));
  INFO(c.body);
  REQUIRE(c.status == 201);
  CHECK(c.header("location") == "/v1/profiles/gpu8");
  CHECK(c.header("etag") == "\"1\"");
  CHECK(c.json["thresholds"]["nccl_busbw_gbps_min"] == 400);
  CHECK(c.json["version"] == 1);
  CHECK(h.call_json(V::post, "/v1/profiles", op, gpu_profile("gpu8")).status == 409);

  SECTION("bad input names the field") {
    json bad = gpu_profile("Bad Name");
    Resp r = h.call_json(V::post, "/v1/profiles", op, bad);
    CHECK(r.status == 400);
    CHECK(r.has_field("/name"));
    bad = gpu_profile("ok");
    bad["thresholds"]["hbm_gbps_min"] = "fast";
    bad["gpu"]["count"] = -1;
    bad["plans"] = {{"quick", {"jitter", "warp_drive"}}};
    bad["virtual"] = {{"vcpus", 4}};
    bad["colour"] = "red";
    bad["thresholds"]["gemm_fraction_of_spec_min"] = 1.5;
    r = h.call_json(V::post, "/v1/profiles", op, bad);
    CHECK(r.status == 400);
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(r.has_field("/thresholds/hbm_gbps_min", "must be a number"));
    CHECK(r.has_field("/gpu/count"));
    CHECK(r.has_field("/plans/quick/1"));
    CHECK(r.has_field("/virtual/memory_mib"));
    CHECK(r.has_field("/colour", "unknown field"));
    CHECK(r.has_field("/thresholds/gemm_fraction_of_spec_min", "must be > 0 and <= 1"));
  }
  SECTION("the gemm check and its floors are accepted") {
    json g = gpu_profile("gemm8");
    g["thresholds"]["gemm_fraction_of_spec_min"] = 0.7;
    g["thresholds"]["gemm_tflops_min"] = 650;
    g["plans"] = {{"full", {"gpu_inventory", "gemm"}}};
    Resp r = h.call_json(V::post, "/v1/profiles", op, g);
    INFO(r.body);
    CHECK(r.status == 201);
  }
  SECTION("any role reads; tenants cannot write") {
    Resp l = h.call(V::get, "/v1/profiles", tenant);
    REQUIRE(l.status == 200);
    REQUIRE(l.json["profiles"].size() == 1);
    CHECK(l.json["next"].is_null());
    CHECK(h.call(V::get, "/v1/profiles/gpu8", tenant).status == 200);
    CHECK(h.call(V::get, "/v1/profiles/nope", tenant).status == 404);
    CHECK(h.call_json(V::post, "/v1/profiles", tenant, gpu_profile("t")).status == 403);
    CHECK(h.call(V::delete_, "/v1/profiles/gpu8", tenant).status == 403);
  }
  SECTION("PATCH merges, checks the whole, keeps the name, honours If-Match") {
    Options o;
    o.content_type = "application/merge-patch+json";
    Resp p = h.call_json(V::patch, "/v1/profiles/gpu8", op, {{"thresholds", {{"hbm_gbps_min", 3000}}}}, o);
    INFO(p.body);
    REQUIRE(p.status == 200);
    CHECK(p.json["thresholds"]["hbm_gbps_min"] == 3000);
    CHECK(p.json["thresholds"]["nccl_busbw_gbps_min"] == 400);
    CHECK(p.json["version"] == 2);
    Resp bad = h.call_json(V::patch, "/v1/profiles/gpu8", op, {{"rdma", {{"ports", "eight"}}}}, o);
    CHECK(bad.status == 400);
    CHECK(bad.has_field("/rdma/ports"));
    CHECK(h.call_json(V::patch, "/v1/profiles/gpu8", op, {{"name", "other"}}, o).has_field("/name"));
    o.headers["If-Match"] = "\"1\"";
    CHECK(h.call_json(V::patch, "/v1/profiles/gpu8", op, {{"description", "x"}}, o).status == 412);
  }
  SECTION("DELETE refuses while nodes use it") {
    h.enroll("n1", {{"profile", "gpu8"}});
    Resp d = h.call(V::delete_, "/v1/profiles/gpu8", op);
    CHECK(d.status == 409);
    CHECK_THAT(d.json["detail"].get<std::string>(), Catch::Contains("used by 1 node"));
    REQUIRE(h.call_json(V::patch, "/v1/nodes/n1", op, {{"profile", nullptr}}).status == 200);
    CHECK(h.call(V::delete_, "/v1/profiles/gpu8", op).status == 204);
    CHECK(h.call(V::get, "/v1/profiles/gpu8", op).status == 404);
  }
}

TEST_CASE("the shipped defaults are valid profiles and seed through the store") {
  ApiHarness h;
  auto seeded = api::seed_default_profiles(h.store());
  REQUIRE(seeded);
  CHECK(seeded->size() == 5);
  Resp r = h.call(V::get, "/v1/profiles/h100-sxm-8x", h.admin());
  REQUIRE(r.status == 200);
  CHECK(r.json["rdma"]["ports"] == 8);
  CHECK(r.json["virtual"]["numa_pin"] == true);
  for (const Profile& p : api::default_profiles()) CHECK(api::check_profile_doc(p.doc));
}

TEST_CASE("gate: burn-in retries a numeric miss once") {
  ApiHarness h;
  create_profile(h, gpu_profile("gpu8"));
  json n = provide(h, "retry-ok", "gpu8", {"numeric_miss", "pass"});
  const std::string id = n["id"];
  json node = h.wait_state(id, "available");
  json list = validations_of(h, id, h.admin());
  REQUIRE(list.size() == 2);
  CHECK(list[0]["attempt"] == 2);
  CHECK(list[0]["result"] == "pass");
  CHECK(list[0]["phase"] == "burn_in");
  CHECK(list[0]["plan"] == "full");
  CHECK(list[0]["profile"] == "gpu8");
  CHECK(list[1]["attempt"] == 1);
  CHECK(list[1]["result"] == "fail");
  CHECK(list[1]["failing"] == json{"nccl_allreduce"});
  CHECK(node["last_validation"] == list[0]["id"]);
  Resp one = h.call(V::get, "/v1/validations/" + list[1]["id"].get<std::string>(), h.admin());
  REQUIRE(one.status == 200);
  CHECK(one.json["report"]["checks"][2]["value"] == 350.0);
  CHECK(one.json["report"]["profile"] == "gpu8");  // the driver was given the profile
}

TEST_CASE("gate: quarantine on a second numeric miss, on any hard failure, and on a missing profile") {
  ApiHarness h;
  create_profile(h, gpu_profile("gpu8"));
  SECTION("two numeric misses") {
    const std::string id = provide(h, "slow", "gpu8", {"numeric_miss"})["id"];
    json node = h.wait_state(id, "quarantined");
    std::string err = node["last_error"];
    CHECK_THAT(err, Catch::Contains("validation (full, attempt 2) failed: nccl_allreduce: 350") &&
                        Catch::Contains("numeric miss on the retry"));
    json list = validations_of(h, id, h.admin());
    REQUIRE(list.size() == 2);
    CHECK(node["last_validation"] == list[0]["id"]);
  }
  SECTION("an XID is not retried") {
    const std::string id = provide(h, "xid", "gpu8", {"xid", "pass"})["id"];
    json node = h.wait_state(id, "quarantined");
    CHECK_THAT(node["last_error"].get<std::string>(), Catch::Contains("gpu_health: GPU 3: XID 79"));
    CHECK(validations_of(h, id, h.admin()).size() == 1);
  }
  SECTION("a missing GPU is not retried") {
    const std::string id = provide(h, "gpu7", "gpu8", {"missing_gpu"})["id"];
    json node = h.wait_state(id, "quarantined");
    CHECK_THAT(node["last_error"].get<std::string>(), Catch::Contains("gpu_inventory: expected 8 GPUs, found 7"));
  }
  SECTION("a profile that does not exist") {
    const std::string id = provide(h, "ghost", "no-such-profile", json())["id"];
    json node = h.wait_state(id, "quarantined");
    CHECK_THAT(node["last_error"].get<std::string>(), Catch::Contains("no-such-profile, which does not exist"));
    CHECK(validations_of(h, id, h.admin()).empty());
  }
}

TEST_CASE("gate: no profile skips validation without a report") {
  ApiHarness h;
  const std::string id = provide(h, "plain", "", json())["id"];
  json node = h.wait_state(id, "available");
  CHECK(node["last_validation"].is_null());
  CHECK(validations_of(h, id, h.admin()).empty());
  Resp ev = h.call(V::get, "/v1/events?node=" + id, h.admin());
  REQUIRE(ev.status == 200);
  bool noted = false;
  for (const json& e : ev.json["events"])
    noted |= e["detail"].value("note", "") == "no profile: burn-in skipped";
  CHECK(noted);
}

TEST_CASE("gate: pre-hand-off runs the quick plan and never hands over a failing node") {
  ApiHarness h;
  create_profile(h, gpu_profile("gpu8"));
  const std::string id = provide(h, "handoff", "gpu8", {"pass", "xid"})["id"];
  h.wait_state(id, "available");
  Resp d = h.call_json(V::put, "/v1/nodes/" + id + "/states/provision", h.admin(), {{"target", "deploy"}});
  INFO(d.body);
  REQUIRE(d.status == 202);
  json node = h.wait_state(id, "quarantined");
  json list = validations_of(h, id, h.admin());
  REQUIRE(list.size() == 2);
  CHECK(list[0]["phase"] == "pre_handoff");
  CHECK(list[0]["plan"] == "quick");
  CHECK(list[0]["result"] == "fail");
  CHECK(list[1]["phase"] == "burn_in");
  CHECK_THAT(node["last_error"].get<std::string>(), Catch::Contains("validation (quick, attempt 1) failed"));
}

TEST_CASE("reports: tenants see only their own nodes'") {
  ApiHarness h;
  create_profile(h, gpu_profile("gpu8"));
  const std::string id = provide(h, "owned", "gpu8", json())["id"];
  h.wait_state(id, "available");
  REQUIRE(h.call_json(V::patch, "/v1/nodes/" + id, h.admin(), {{"tenant", "acme"}}).status == 200);
  std::string acme = h.make_token("tenant", "acme", "acme");
  std::string other = h.make_token("tenant", "other", "other");
  // A node given to a tenant outside an allocation (PATCH tenant) has no
  // period of the tenant's: its reports stay staff's (ValidationStore; the
  // allocation case is tests/unit/api/allocation_refs_test.cc).
  CHECK(validations_of(h, id, acme).empty());
  json list = validations_of(h, id, h.admin());
  REQUIRE(list.size() == 1);
  const std::string vid = list[0]["id"];
  CHECK(h.call(V::get, "/v1/validations/" + vid, acme).status == 404);
  CHECK(h.call(V::get, "/v1/validations/" + vid, h.admin()).status == 200);
  CHECK(h.call(V::get, "/v1/nodes/" + id + "/validations", other).status == 404);
  CHECK(h.call(V::get, "/v1/validations/" + vid, other).status == 404);
  // Running one is staff work: 403 on its own node, 404 on another's.
  CHECK(h.call_json(V::post, "/v1/nodes/" + id + "/validations", acme, {{"plan", "quick"}}).status == 403);
  CHECK(h.call_json(V::post, "/v1/nodes/" + id + "/validations", other, {{"plan", "quick"}}).status == 404);
}

TEST_CASE("on-demand validation") {
  ApiHarness h;
  create_profile(h, gpu_profile("gpu8"));
  const std::string id = provide(h, "od", "gpu8", {"pass", "numeric_miss"})["id"];
  h.wait_state(id, "available");
  Resp bad = h.call_json(V::post, "/v1/nodes/" + id + "/validations", h.admin(), {{"plan", "soak"}});
  CHECK(bad.status == 400);
  CHECK(bad.has_field("/plan"));
  Resp r = h.call_json(V::post, "/v1/nodes/" + id + "/validations", h.admin(), {{"plan", "quick"}});
  INFO(r.body);
  REQUIRE(r.status == 202);
  json node = h.wait_state(id, "available");  // the state never changes
  json list = validations_of(h, id, h.admin());
  REQUIRE(list.size() == 2);
  CHECK(list[0]["phase"] == "on_demand");
  CHECK(list[0]["plan"] == "quick");
  CHECK(list[0]["result"] == "fail");  // no retry on demand: the report is what it is
  CHECK(node["last_validation"] == list[0]["id"]);

  SECTION("409 with the reason") {
    json plain = h.enroll("plain");
    Resp nop = h.call_json(V::post, "/v1/nodes/plain/validations", h.admin(), {{"plan", "full"}});
    CHECK(nop.status == 409);
    CHECK_THAT(nop.json["detail"].get<std::string>(), Catch::Contains("has no profile"));
    REQUIRE(h.call_json(V::patch, "/v1/nodes/plain", h.admin(), {{"profile", "gpu8"}}).status == 200);
    Resp enroll_state = h.call_json(V::post, "/v1/nodes/plain/validations", h.admin(), {{"plan", "full"}});
    CHECK(enroll_state.status == 409);
    CHECK_THAT(enroll_state.json["detail"].get<std::string>(), Catch::Contains("cannot validate a node in state enroll"));
  }
}

TEST_CASE("availability: free counts, prices, medians and the virtualization tax") {
  ApiHarness h;
  create_profile(h, gpu_profile("gpu8"));
  create_profile(h, {{"name", "idle"}});
  auto make = [&](const std::string& name, NodeKind kind, ProvisionState state) {
    Node n;
    n.name = name;
    n.kind = kind;
    n.profile = "gpu8";
    n.bmc.driver = "fake";
    n.bmc.address = "bmc";
    n.provision_state = state;
    EventDraft e;
    e.type = "node.created";
    auto r = h.store().create_node(n, e);
    REQUIRE(r);
    return *r;
  };
  auto report = [&](const Node& n, const std::string& result, double nccl, double jitter) {
    ValidationRecord v;
    v.node_id = n.id;
    v.profile = n.profile;
    v.node_kind = std::string(to_string(n.kind));
    v.plan = "quick";
    v.phase = kPhasePreHandoff;
    v.result = result;
    v.report = {{"result", result},
                {"checks",
                 {{{"name", "nccl_allreduce"}, {"status", result}, {"value", nccl}},
                  {{"name", "jitter"}, {"status", "pass"}, {"value", jitter}},
                  {{"name", "hbm_bandwidth"}, {"status", "skip"}, {"value", nullptr}}}}};
    REQUIRE(h.store().record_validation(v, {}));
  };
  Node b1 = make("b1", NodeKind::kBaremetal, ProvisionState::kAvailable);
  Node b2 = make("b2", NodeKind::kBaremetal, ProvisionState::kActive);
  Node v1 = make("v1", NodeKind::kVirtual, ProvisionState::kAvailable);
  report(b1, "pass", 400, 10);
  report(b2, "pass", 420, 20);
  report(b1, "pass", 410, 30);
  report(b1, "fail", 100, 1000);  // failing reports do not count
  report(v1, "pass", 380, 40);
  report(v1, "pass", 390, 60);

  std::string tenant = h.make_token("tenant", "acme");
  Resp r = h.call(V::get, "/v1/availability", tenant);
  INFO(r.body);
  REQUIRE(r.status == 200);
  CHECK(r.json["window"] == 20);
  json gpu8;
  for (const json& p : r.json["availability"])
    if (p["profile"] == "gpu8") gpu8 = p;
  REQUIRE(gpu8.is_object());
  const json& bm = gpu8["kinds"]["baremetal"];
  const json& vm = gpu8["kinds"]["virtual"];
  CHECK(bm["free"] == 1);
  CHECK(vm["free"] == 1);
  CHECK(bm["price_per_second"] == 0.0066);
  CHECK(vm["price_per_second"] == 0.0069);
  CHECK(bm["measured"]["nccl_allreduce"]["median"] == 410.0);
  CHECK(bm["measured"]["nccl_allreduce"]["samples"] == 3);
  CHECK(bm["measured"]["nccl_allreduce"]["unit"] == "GB/s");
  CHECK(bm["measured"]["jitter"]["median"] == 20.0);
  CHECK_FALSE(bm["measured"].contains("hbm_bandwidth"));
  CHECK(vm["measured"]["nccl_allreduce"]["median"] == 385.0);
  const json& tax = gpu8["virtualization_tax"];
  CHECK(tax["nccl_allreduce"]["relative"].get<double>() == Approx((410.0 - 385.0) / 410.0));
  CHECK(tax["jitter"]["relative"].get<double>() == Approx((50.0 - 20.0) / 20.0));  // lower is better
  CHECK_FALSE(tax.contains("hbm_bandwidth"));

  Resp w = h.call(V::get, "/v1/availability?window=1&profile=gpu8", tenant);
  REQUIRE(w.status == 200);
  REQUIRE(w.json["availability"].size() == 1);
  CHECK(w.json["availability"][0]["kinds"]["baremetal"]["measured"]["nccl_allreduce"]["median"] == 410.0);
  CHECK(w.json["availability"][0]["kinds"]["baremetal"]["measured"]["nccl_allreduce"]["samples"] == 1);
  CHECK(h.call(V::get, "/v1/availability?profile=nope", tenant).status == 404);
  CHECK(h.call(V::get, "/v1/availability?window=0", tenant).status == 400);
  json idle;
  for (const json& p : r.json["availability"])
    if (p["profile"] == "idle") idle = p;
  CHECK(idle["virtualization_tax"].is_null());
  CHECK(idle["kinds"]["baremetal"]["price_per_second"].is_null());
}
