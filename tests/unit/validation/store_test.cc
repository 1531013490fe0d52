// Profiles and validation reports in the SQLite store (sql/profiles.cc, sql/validations.cc).
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <set>

#include "controller/api/profile_input.h"
#include "controller/store/store.h"

using namespace kiln;
using nlohmann::json;

namespace {

struct TempStore {
  TempStore() {
    char tmpl[] = "/tmp/kiln-validation-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    auto s = open_sqlite_store({.path = dir + "/kiln.db"});
    REQUIRE(s);
    store = std::move(*s);
    REQUIRE(store->migrate());
  }
  ~TempStore() {
    store.reset();
    std::filesystem::remove_all(dir);
  }
  Node node(const std::string& name, const std::string& profile, NodeKind kind = NodeKind::kBaremetal,
            ProvisionState state = ProvisionState::kAvailable) {
    Node n;
    n.name = name;
    n.kind = kind;
    n.profile = profile;
    n.bmc.driver = "fake";
    n.bmc.address = "bmc-" + name;
    n.provision_state = state;
    EventDraft e;
    e.type = "node.created";
    auto r = store->create_node(n, e);
    REQUIRE(r);
    return *r;
  }
  std::string dir;
  std::unique_ptr<NodeStore> store;
};

Profile profile(const std::string& name, json doc = json::object()) {
  Profile p;
  p.name = name;
  p.doc = std::move(doc);
  return p;
}

ValidationRecord record(const Node& n, const std::string& result, double nccl) {
  ValidationRecord v;
  v.node_id = n.id;
  v.profile = n.profile;
  v.node_kind = std::string(to_string(n.kind));
  v.plan = "quick";
  v.phase = kPhasePreHandoff;
  v.result = result;
  v.report = {{"result", result},
              {"checks", {{{"name", "nccl_allreduce"}, {"status", result}, {"value", nccl}, {"unit", "GB/s"}}}}};
  return v;
}

}  // namespace

TEST_CASE("profiles: create, read, replace with a version check, delete unless used") {
  TempStore t;
  auto created = t.store->create_profile(profile("p1", {{"description", "one"}}));
  REQUIRE(created);
  CHECK(created->version == 1);
  CHECK(created->doc["name"] == "p1");
  auto dup = t.store->create_profile(profile("p1"));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == Code::kConflict);
  CHECK(dup.error().fields.at(0).field == "/name");

  auto got = t.store->get_profile("p1");
  REQUIRE(got);
  CHECK(got->doc["description"] == "one");
  CHECK(t.store->get_profile("nope").error().code == Code::kNotFound);

  Profile next = profile("p1", {{"description", "two"}});
  auto stale = t.store->replace_profile(next, 7);
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == Code::kPreconditionFailed);
  auto replaced = t.store->replace_profile(next, 1);
  REQUIRE(replaced);
  CHECK(replaced->version == 2);
  CHECK(replaced->doc["description"] == "two");
  CHECK(replaced->created_at == created->created_at);

  REQUIRE(t.store->create_profile(profile("p0")));
  auto all = t.store->list_profiles();
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].name == "p0");

  t.node("n1", "p1");
  Status used = t.store->delete_profile("p1");
  REQUIRE_FALSE(used);
  CHECK(used.error().code == Code::kConflict);
  CHECK_THAT(used.error().message, Catch::Contains("used by 1 node"));
  CHECK(t.store->delete_profile("p0"));
  CHECK(t.store->delete_profile("p0").error().code == Code::kNotFound);
}

TEST_CASE("seeding defaults: created once, edits kept, deletions respected") {
  TempStore t;
  std::vector<std::string> errors;
  std::vector<Profile> defaults = api::default_profiles(&errors);
  CHECK(errors.empty());
  std::set<std::string> names;
  for (const Profile& p : defaults) names.insert(p.name);
  CHECK(names == std::set<std::string>{"cpu-lab", "h100-pcie-8x", "h100-sxm-8x", "h100-vm-1x", "h200-sxm-8x"});

  auto first = t.store->seed_profiles(defaults);
  REQUIRE(first);
  CHECK(first->size() == defaults.size());
  // An operator edits one and deletes another.
  Profile edited = profile("h100-sxm-8x", {{"description", "ours"}});
  REQUIRE(t.store->replace_profile(edited, std::nullopt));
  REQUIRE(t.store->delete_profile("cpu-lab"));
  auto again = t.store->seed_profiles(defaults);
  REQUIRE(again);
  CHECK(again->empty());
  CHECK(t.store->get_profile("h100-sxm-8x")->doc["description"] == "ours");
  CHECK(t.store->get_profile("cpu-lab").error().code == Code::kNotFound);
  // A new default shipped later is created.
  std::vector<Profile> more = defaults;
  more.push_back(profile("b200-8x"));
  auto later = t.store->seed_profiles(more);
  REQUIRE(later);
  CHECK(*later == std::vector<std::string>{"b200-8x"});
}

TEST_CASE("shipped thresholds carry the public figures") {
  std::map<std::string, json> by_name;
  for (const Profile& p : api::default_profiles()) by_name[p.name] = p.doc;
  json h100 = by_name.at("h100-sxm-8x");
  CHECK(h100["gpu"]["count"] == 8);
  CHECK(h100["nvlink"]["links_per_gpu"] == 18);
  CHECK(h100["thresholds"]["nccl_busbw_gbps_min"] == 400);
  CHECK(h100["thresholds"]["hbm_gbps_min"].get<double>() == Approx(0.85 * 3350).epsilon(0.01));
  CHECK(h100["thresholds"]["pcie_gbps_min"].get<double>() >= 40);
  CHECK(by_name.at("h200-sxm-8x")["thresholds"]["hbm_gbps_min"].get<double>() == Approx(0.85 * 4800).epsilon(0.01));
  json lab = by_name.at("cpu-lab");
  CHECK(lab["gpu"]["count"] == 0);
  CHECK(lab["plans"]["quick"] == json{"gpu_inventory", "jitter", "nvme_read", "nccl_multinode"});
  // Multi-node: 75% of 8 rails x 400 Gb/s (docs/validation.md).
  CHECK(h100["thresholds"]["nccl_multinode_busbw_gbps_min"] == 300);
  CHECK(by_name.at("h200-sxm-8x")["thresholds"]["nccl_multinode_busbw_gbps_min"] == 300);
  CHECK(lab["thresholds"]["jitter_p999_us_max"].get<double>() >= 10000);
  CHECK(by_name.at("h100-vm-1x")["virtual"]["gpus"] == 1);
}

TEST_CASE("validation records: stored with the node's last_validation, listed newest first") {
  TempStore t;
  Node n = t.node("n1", "p1");
  Node other = t.node("n2", "p1");
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    EventDraft e;
    e.type = "validation.recorded";
    auto r = t.store->record_validation(record(n, i % 2 ? "fail" : "pass", 400 + i), {e});
    REQUIRE(r);
    ids.push_back(r->id);
    CHECK(t.store->get_node(n.id)->last_validation == r->id);
  }
  auto other_report = t.store->record_validation(record(other, "pass", 1), {});
  REQUIRE(other_report);
  auto page = t.store->list_validations(n.id, "", 3, "");
  REQUIRE(page);
  REQUIRE(page->size() == 3);
  CHECK((*page)[0].id == ids[4]);
  CHECK((*page)[2].id == ids[2]);
  auto rest = t.store->list_validations(n.id, "", 3, page->back().id);
  REQUIRE(rest);
  REQUIRE(rest->size() == 2);
  CHECK((*rest)[1].id == ids[0]);
  auto one = t.store->get_validation(ids[1], "");
  REQUIRE(one);
  CHECK(one->result == "fail");
  CHECK(one->report["checks"][0]["value"] == 401);
  CHECK(t.store->get_validation("00000000-0000-4000-8000-000000000000", "").error().code == Code::kNotFound);
  // A report for a node that is gone is refused.
  Node gone = n;
  gone.id = "00000000-0000-4000-8000-000000000001";
  CHECK(t.store->record_validation(record(gone, "pass", 1), {}).error().code == Code::kNotFound);
  // The events went in with it.
  auto events = t.store->list_events(0, 100, n.id, std::nullopt);
  REQUIRE(events);
  int recorded = 0;
  for (const auto& e : *events) recorded += e.type == "validation.recorded";
  CHECK(recorded == 5);

  // Newest first across the profile's nodes, failing reports left out.
  auto passing = t.store->recent_passing_validations("p1", NodeKind::kBaremetal, 3);
  REQUIRE(passing);
  REQUIRE(passing->size() == 3);
  CHECK(passing->at(0).id == other_report->id);
  CHECK(passing->at(1).id == ids[4]);
  CHECK(passing->at(2).id == ids[2]);
  CHECK(t.store->recent_passing_validations("p1", NodeKind::kVirtual, 5)->empty());
}

TEST_CASE("free nodes by profile and kind") {
  TempStore t;
  t.node("a", "p1");
  t.node("b", "p1");
  t.node("v", "p1", NodeKind::kVirtual);
  t.node("m", "p1");
  t.node("busy", "p1", NodeKind::kBaremetal, ProvisionState::kActive);
  REQUIRE(t.store->update_node_if("m", {}, [](Node& x) {
    x.maintenance = true;
    return ok_status();
  }, {}));
  t.node("f", "p2");
  REQUIRE(t.store->update_node_if("f", {}, [](Node& x) {
    x.fault = "power_failure";
    return ok_status();
  }, {}));
  auto free = t.store->count_free_nodes();
  REQUIRE(free);
  CHECK(free->at({"p1", NodeKind::kBaremetal}) == 2);
  CHECK(free->at({"p1", NodeKind::kVirtual}) == 1);
  CHECK(free->count({"p2", NodeKind::kBaremetal}) == 0);
}
