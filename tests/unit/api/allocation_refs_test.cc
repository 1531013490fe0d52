// Allocation references and what a node's next tenant may read, through
// Api::handle() on a real SQLite store with the real conductor and allocation
// engine driving fake-driver nodes (api_harness.h):
//  - a staff lookup by a name several tenants use is a 409 asking for the id
//    or tenant/name, on every route that takes a reference; tenant/name
//    (percent-encoded in the path, as the CLI sends it) resolves;
//  - a node's next tenant reads only the validation reports of its own
//    period (list, by id, the node's and the member's last_validation);
//  - prices and leases are bounded so that the dearest row's cost fits.
#include <catch2/catch.hpp>

#include <chrono>
#include <limits>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/ids.h"
#include "controller/api/allocation_input.h"
#include "controller/api/profile_input.h"
#include "controller/tenancy/usage.h"
#include "tests/support/wait_until.h"
#include "tests/unit/api/api_harness.h"
#include "tests/unit/api/tenant_fixtures.h"

using namespace kiln;
using namespace kiln::test;
using json = nlohmann::json;
using V = http::bhttp::verb;

namespace {

// The default profiles and a ready public image "ubuntu".
void seed_ubuntu(ApiHarness& h) {
  seed_profiles(h);
  add_ready_image(h, "ubuntu");
}

std::string post_allocation(ApiHarness& h, const std::string& token, const json& body) {
  Resp r = h.call_json(V::post, "/v1/allocations", token, body);
  INFO(r.body);
  REQUIRE(r.status == 202);
  return r.json["id"];
}

// A report stored for `node_id` now, as an on-demand run's would be.
std::string record_report(ApiHarness& h, const std::string& node_id, double value) {
  ValidationRecord v;
  v.node_id = node_id;
  v.profile = "cpu-lab";
  v.node_kind = "baremetal";
  v.plan = "quick";
  v.phase = kPhaseOnDemand;
  v.result = "pass";
  v.report = {{"result", "pass"}, {"checks", {{{"name", "hbm_bandwidth"}, {"status", "pass"}, {"value", value}}}}};
  Result<ValidationRecord> r = h.store().record_validation(v, {});
  REQUIRE(r);
  return r->id;
}

std::set<std::string> report_ids(ApiHarness& h, const std::string& node_id, const std::string& token) {
  Resp r = h.call(V::get, "/v1/nodes/" + node_id + "/validations", token);
  INFO(r.body);
  REQUIRE(r.status == 200);
  std::set<std::string> out;
  for (const json& v : r.json["validations"]) out.insert(v["id"].get<std::string>());
  return out;
}

}  // namespace

TEST_CASE("allocations: a staff reference to a name two tenants use is a 409 asking for the id or tenant/name",
          "[allocations][tenancy]") {
  ApiHarness h;
  seed_ubuntu(h);
  make_tenant(h, "acme");
  make_tenant(h, "zeta");
  const std::string acme = h.make_token("tenant", "acme");
  const std::string zeta = h.make_token("tenant", "zeta");
  const std::string op = h.make_token("operator");
  for (int i = 0; i < 2; ++i) available_node(h, "n" + std::to_string(i));
  const std::string a = post_allocation(h, acme, allocation_request(1, {{"name", "train"}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string z = post_allocation(h, zeta, allocation_request(1, {{"name", "train"}}));

  // Every route that takes a reference: 409 problem+json, nothing touched.
  for (const std::string& token : {h.admin(), op}) {
    Resp get = h.call(V::get, "/v1/allocations/train", token);
    INFO(get.body);
    CHECK(get.status == 409);
    CHECK(get.header("content-type") == "application/problem+json");
    CHECK_THAT(get.json["detail"].get<std::string>(),
               Catch::Contains("used by 2 tenants (acme, zeta): ask for it by id or as <tenant>/train"));
    CHECK(h.call(V::delete_, "/v1/allocations/train", token).status == 409);
    CHECK(h.call_json(V::put, "/v1/allocations/train/lease", token, {{"lease_seconds", 3600}}).status == 409);
    CHECK(h.call(V::get, "/v1/usage?allocation=train", token).status == 409);
  }
  for (const std::string& id : {a, z}) {
    json cur = h.call(V::get, "/v1/allocations/" + id, h.admin()).json;
    CHECK(cur["state"] != "releasing");
    CHECK(cur["lease_seconds"].is_null());
  }

  // tenant/name, percent-encoded in the path as the CLI sends it.
  CHECK(h.call(V::get, "/v1/allocations/acme%2Ftrain", op).json["id"] == a);
  CHECK(h.call(V::get, "/v1/allocations/zeta%2Ftrain", op).json["id"] == z);
  Resp renewed = h.call_json(V::put, "/v1/allocations/acme%2Ftrain/lease", op, {{"lease_seconds", 3600}});
  INFO(renewed.body);
  CHECK(renewed.status == 200);
  CHECK(renewed.json["id"] == a);
  CHECK(h.call(V::get, "/v1/usage?allocation=acme%2Ftrain", op).status == 200);
  Resp released = h.call(V::delete_, "/v1/allocations/zeta%2Ftrain", op);
  INFO(released.body);
  CHECK(released.status == 202);
  CHECK(released.json["id"] == z);
  CHECK(h.call(V::get, "/v1/allocations/" + a, op).json["state"] != "releasing");
  // Released or not, zeta used the name: the bare name stays ambiguous to staff.
  CHECK(h.call(V::get, "/v1/allocations/train", op).status == 409);

  // A tenant's bare name is its own; tenant/name only its own; by id as before.
  CHECK(h.call(V::get, "/v1/allocations/train", acme).json["id"] == a);
  CHECK(h.call(V::get, "/v1/allocations/acme%2Ftrain", acme).json["id"] == a);
  CHECK(h.call(V::get, "/v1/allocations/zeta%2Ftrain", acme).status == 404);
  CHECK(h.call(V::delete_, "/v1/allocations/zeta%2Ftrain", acme).status == 404);
  CHECK(h.call(V::get, "/v1/allocations/" + z, acme).status == 404);
  CHECK(h.call(V::get, "/v1/allocations/" + a, op).json["id"] == a);

  // A name that looks like an id would shadow (or be shadowed by) an id.
  Resp uuid_named = h.call_json(V::post, "/v1/allocations", acme, allocation_request(1, {{"name", z}}));
  CHECK(uuid_named.status == 400);
  CHECK(uuid_named.field() == "/name");
}

TEST_CASE("validations: a node's next tenant reads only its own period's reports, and staff read all",
          "[validations][tenancy]") {
  ApiHarness h;
  seed_ubuntu(h);
  make_tenant(h, "acme");
  make_tenant(h, "zeta");
  const std::string acme = h.make_token("tenant", "acme");
  const std::string zeta = h.make_token("tenant", "zeta");
  const std::string node_id = available_node(h, "solo");
  // The pool's report, before anyone holds the node.
  const std::string r0 = record_report(h, node_id, 1);

  // acme's period: R1.
  const std::string a = post_allocation(h, acme, allocation_request(1));
  json ready = wait_allocation(h, a, "ready");
  REQUIRE(ready["nodes"].size() == 1);
  REQUIRE(ready["nodes"][0]["id"] == node_id);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::string r1 = record_report(h, node_id, 2);
  CHECK(report_ids(h, node_id, acme).count(r1) == 1);
  CHECK(report_ids(h, node_id, acme).count(r0) == 0);
  CHECK(h.call(V::get, "/v1/validations/" + r1, acme).status == 200);
  CHECK(h.call(V::get, "/v1/validations/" + r0, acme).status == 404);
  CHECK(h.call(V::get, "/v1/nodes/" + node_id, acme).json["last_validation"] == r1);

  // Released and cleaned: acme reads none of the node's reports any more.
  REQUIRE(h.call(V::delete_, "/v1/allocations/" + a, acme).status == 202);
  wait_allocation(h, a, "released");
  h.wait_state(node_id, "available");
  CHECK(h.call(V::get, "/v1/validations/" + r1, acme).status == 404);
  CHECK(h.call(V::get, "/v1/nodes/" + node_id + "/validations", acme).status == 404);

  // zeta gets the same node.
  const std::string z = post_allocation(h, zeta, allocation_request(1));
  json zready = wait_allocation(h, z, "ready");
  REQUIRE(zready["nodes"].size() == 1);
  REQUIRE(zready["nodes"][0]["id"] == node_id);
  const std::set<std::string> earlier = report_ids(h, node_id, h.admin());  // staff: everything so far
  // Before zeta's own report: whatever the node points at is zeta's (the
  // deploy's gate) or nothing — never acme's.
  json before = h.call(V::get, "/v1/nodes/" + node_id, zeta).json;
  CHECK(before["last_validation"] != r1);
  if (before["last_validation"].is_string())
    CHECK(h.call(V::get, "/v1/validations/" + before["last_validation"].get<std::string>(), zeta).status == 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::string r2 = record_report(h, node_id, 3);

  const std::set<std::string> seen = report_ids(h, node_id, zeta);
  CHECK(seen.count(r2) == 1);
  CHECK(seen.count(r1) == 0);
  CHECK(seen.count(r0) == 0);
  // Of the reports from before R2, zeta reads at most its own gate's.
  const std::string gate = before["last_validation"].is_string() ? before["last_validation"].get<std::string>() : "";
  for (const std::string& id : seen) CHECK((earlier.count(id) == 0 || id == gate));
  CHECK(h.call(V::get, "/v1/validations/" + r2, zeta).status == 200);
  Resp old = h.call(V::get, "/v1/validations/" + r1, zeta);
  CHECK(old.status == 404);
  CHECK(old.json["detail"] == "no such validation: " + r1);  // as a missing one
  CHECK(h.call(V::get, "/v1/validations/" + r0, zeta).status == 404);
  CHECK(h.call(V::get, "/v1/nodes/" + node_id, zeta).json["last_validation"] == r2);
  json member = h.call(V::get, "/v1/allocations/" + z, zeta).json["nodes"][0];
  CHECK(member["last_validation"] == r2);
  // acme, gone, reads neither.
  CHECK(h.call(V::get, "/v1/validations/" + r2, acme).status == 404);

  // Staff read every report.
  const std::set<std::string> all = report_ids(h, node_id, h.admin());
  for (const std::string& id : {r0, r1, r2}) {
    CHECK(all.count(id) == 1);
    CHECK(h.call(V::get, "/v1/validations/" + id, h.admin()).status == 200);
  }
}

TEST_CASE("usage bounds: the dearest price and the longest lease are accepted, one above is refused naming the field",
          "[allocations][usage]") {
  ApiHarness h;
  seed_ubuntu(h);
  make_tenant(h, "acme");
  const std::string acme = h.make_token("tenant", "acme");
  available_node(h, "n0");
  available_node(h, "n1");

  // The largest allowed price times the longest period a row may bill fits,
  // and so does the longest lease at that price, many times over.
  static_assert(kMaxPriceMicrosPerSecond <= std::numeric_limits<int64_t>::max() / kMaxMeteredSeconds);
  static_assert(api::kMaxLeaseSeconds < kMaxMeteredSeconds);
  auto profile = [](const char* key, double price) {
    return json{{"name", std::string("priced-") + (key[0] == 'b' ? "bm" : "vm") + std::to_string(price > 1000)},
                {"price", {{key, price}}}};
  };
  for (const char* key : {"baremetal_per_second", "virtual_per_second"}) {
    INFO(key);
    Resp top = h.call_json(V::post, "/v1/profiles", h.admin(), profile(key, kMaxPricePerSecond));
    INFO(top.body);
    CHECK(top.status == 201);
    Resp over = h.call_json(V::post, "/v1/profiles", h.admin(), profile(key, kMaxPricePerSecond + 0.000001));
    CHECK(over.status == 400);
    CHECK(over.field() == std::string("/price/") + key);
  }
  // The same bound on a merge patch.
  Resp patched = h.call_json(V::patch, "/v1/profiles/cpu-lab", h.admin(),
                             {{"price", {{"baremetal_per_second", 1e6}}}},
                             Options{{}, "application/merge-patch+json"});
  CHECK(patched.status == 400);
  CHECK(patched.field() == "/price/baremetal_per_second");

  // Leases: the longest is accepted on create and renewal, one second more is refused.
  const std::string id = post_allocation(h, acme, allocation_request(1, {{"lease_seconds", api::kMaxLeaseSeconds}}));
  Resp longer = h.call_json(V::post, "/v1/allocations", acme, allocation_request(1, {{"lease_seconds", api::kMaxLeaseSeconds + 1}}));
  CHECK(longer.status == 400);
  CHECK(longer.field() == "/lease_seconds");
  CHECK(h.call_json(V::put, "/v1/allocations/" + id + "/lease", acme, {{"lease_seconds", api::kMaxLeaseSeconds}})
            .status == 200);
  Resp renew = h.call_json(V::put, "/v1/allocations/" + id + "/lease", acme, {{"lease_seconds", api::kMaxLeaseSeconds + 1}});
  CHECK(renew.status == 400);
  CHECK(renew.field() == "/lease_seconds");
}
