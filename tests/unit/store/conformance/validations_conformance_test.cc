// ValidationStore conformance: validation reports, the node's
// last_validation and their events, and the free-node counts availability
// reads beside them, on SQLite and PostgreSQL (backends.h). The first and
// last cases began as SQLite-only checks in tests/unit/validation/store_test.cc.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;
using nlohmann::json;

namespace {

template <typename Backend>
Node add_node(Backend& b, const std::string& name, const std::string& profile, NodeKind kind = NodeKind::kBaremetal,
              ProvisionState state = ProvisionState::kAvailable) {
  Node n = make_node(name);
  n.kind = kind;
  n.profile = profile;
  n.provision_state = state;
  auto r = b.nodes().create_node(n, event("node.created"));
  REQUIRE(r);
  return *r;
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

TEMPLATE_TEST_CASE("conformance: validation records: stored with the node's last_validation, listed newest first",
                   "[store][conformance][validations]", KILN_STORE_BACKENDS) {
  TestType b;
  ValidationStore& s = b.validations();
  Node n = add_node(b, "n1", "p1");
  Node other = add_node(b, "n2", "p1");
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    b.clock.advance_ms(10);
    // The event names no node: the store gives it the report's.
    auto r = s.record_validation(record(n, i % 2 ? "fail" : "pass", 400 + i), {event("validation.recorded")});
    REQUIRE(r);
    ids.push_back(r->id);
    CHECK(r->finished_at == b.clock.now_ms());  // filled when unset
    CHECK(r->started_at == r->finished_at);
    auto node = b.nodes().get_node(n.id);
    REQUIRE(node);
    CHECK(node->last_validation == r->id);
    CHECK(node->version == 2 + i);  // each report is a node write
    CHECK(node->updated_at == b.clock.now_ms());
  }
  ValidationRecord given = record(other, "pass", 1);
  given.id = "0a0a0a0a-0000-4000-8000-000000000000";
  given.started_at = 111;
  given.finished_at = 222;
  given.attempt = 2;
  given.phase = kPhaseBurnIn;
  given.plan = "full";
  auto other_report = s.record_validation(given, {});
  REQUIRE(other_report);
  CHECK(other_report->id == given.id);

  auto page = s.list_validations(n.id, "", 3, "");
  REQUIRE(page);
  REQUIRE(page->size() == 3);
  CHECK((*page)[0].id == ids[4]);
  CHECK((*page)[2].id == ids[2]);
  auto rest = s.list_validations(n.id, "", 3, page->back().id);
  REQUIRE(rest);
  REQUIRE(rest->size() == 2);
  CHECK((*rest)[1].id == ids[0]);
  CHECK(s.list_validations(n.id, "", 3, ids[0])->empty());
  CHECK(s.list_validations(n.id, "", 0, "").error().code == Code::kInvalidArgument);
  CHECK(s.list_validations(n.id, "", 0, "").error().fields.at(0).field == "limit");

  auto one = s.get_validation(ids[1], "");
  REQUIRE(one);
  CHECK(one->result == "fail");
  CHECK(one->node_id == n.id);
  CHECK(one->profile == "p1");
  CHECK(one->node_kind == "baremetal");
  CHECK(one->report["checks"][0]["value"] == 401);
  auto full = s.get_validation("0A0A0A0A-0000-4000-8000-000000000000", "");  // any case
  REQUIRE(full);
  CHECK(full->started_at == 111);
  CHECK(full->finished_at == 222);
  CHECK(full->attempt == 2);
  CHECK(full->phase == kPhaseBurnIn);
  CHECK(full->plan == "full");
  CHECK(s.get_validation("00000000-0000-4000-8000-000000000000", "").error().code == Code::kNotFound);

  // A report for a node that is gone is refused, and nothing is written.
  Node gone = n;
  gone.id = "00000000-0000-4000-8000-000000000001";
  const int64_t seq_before = *b.events().last_event_seq();
  auto refused = s.record_validation(record(gone, "pass", 1), {event("validation.recorded")});
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Code::kNotFound);
  CHECK(*b.events().last_event_seq() == seq_before);

  // The events went in with the reports, carrying the node.
  auto events = b.events().list_events(0, 100, n.id, std::nullopt);
  REQUIRE(events);
  int recorded = 0;
  for (const auto& e : *events) recorded += e.type == "validation.recorded";
  CHECK(recorded == 5);

  // Newest first across the profile's nodes, failing reports left out.
  auto passing = s.recent_passing_validations("p1", NodeKind::kBaremetal, 3);
  REQUIRE(passing);
  REQUIRE(passing->size() == 3);
  CHECK(passing->at(0).id == other_report->id);
  CHECK(passing->at(1).id == ids[4]);
  CHECK(passing->at(2).id == ids[2]);
  CHECK(s.recent_passing_validations("p1", NodeKind::kVirtual, 5)->empty());
  CHECK(s.recent_passing_validations("p1", NodeKind::kBaremetal, 0).error().code == Code::kInvalidArgument);

  // Reports go with their node.
  REQUIRE(b.nodes().delete_node_if(other.id, {}, event("node.deleted")));
  CHECK(s.get_validation(given.id, "").error().code == Code::kNotFound);
}

TEMPLATE_TEST_CASE("conformance: a report's events are announced to the listener once committed",
                   "[store][conformance][validations]", KILN_STORE_BACKENDS) {
  TestType b;
  Node n = add_node(b, "n1", "p1");
  std::mutex seen_mu;
  int64_t highest = 0;
  b.events().set_event_listener([&](int64_t seq) {
    std::lock_guard<std::mutex> l(seen_mu);
    highest = std::max(highest, seq);
  });
  REQUIRE(b.validations().record_validation(record(n, "pass", 1), {event("validation.recorded")}));
  const int64_t last = *b.events().last_event_seq();
  {
    // Announced on the writing thread before record_validation returns.
    std::lock_guard<std::mutex> l(seen_mu);
    CHECK(highest == last);
  }
  Node gone = n;
  gone.id = "00000000-0000-4000-8000-000000000001";
  REQUIRE_FALSE(b.validations().record_validation(record(gone, "pass", 1), {event("validation.recorded")}));
  std::lock_guard<std::mutex> l(seen_mu);
  CHECK(highest == last);  // a refused report announces nothing
}

TEMPLATE_TEST_CASE("conformance: reports recorded through two handles at once are all kept, in order per node",
                   "[store][conformance][validations][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  ValidationStore* handles[2] = {&b.validations(), second.get()};
  constexpr int kNodes = 3, kRecorders = 6, kEach = 8;
  std::vector<Node> nodes;
  for (int i = 0; i < kNodes; ++i) nodes.push_back(add_node(b, "n" + std::to_string(i), "p1"));
  std::atomic<int> errors{0};
  std::mutex mu;
  std::string first_error;
  // Each recorder's reports on a node carry an increasing value, so the
  // node's list must show each recorder's values decreasing.
  std::vector<std::thread> recorders;
  for (int r = 0; r < kRecorders; ++r) {
    recorders.emplace_back([&, r] {
      for (int i = 0; i < kEach; ++i) {
        ValidationRecord v = record(nodes[(r + i) % kNodes], "pass", r * 1000 + i);
        auto got = handles[r % 2]->record_validation(v, {event("validation.recorded")});
        if (!got) {
          ++errors;
          std::lock_guard<std::mutex> l(mu);
          if (first_error.empty()) first_error = got.error().message;
        }
      }
    });
  }
  for (auto& t : recorders) t.join();
  INFO("first error: " << first_error);
  REQUIRE(errors == 0);

  std::set<std::string> seen;
  for (const Node& n : nodes) {
    // Paged two at a time by marker: every report exactly once.
    std::vector<ValidationRecord> all;
    std::string marker;
    for (;;) {
      auto page = b.validations().list_validations(n.id, "", 2, marker);
      REQUIRE(page);
      if (page->empty()) break;
      all.insert(all.end(), page->begin(), page->end());
      marker = page->back().id;
    }
    std::map<int, int> last_value;  // recorder -> the value of its newer report
    for (const ValidationRecord& v : all) {
      CHECK(seen.insert(v.id).second);
      const int value = v.report["checks"][0]["value"].get<int>();
      auto it = last_value.find(value / 1000);
      if (it != last_value.end()) CHECK(value < it->second);
      last_value[value / 1000] = value;
    }
    auto node = b.nodes().get_node(n.id);
    REQUIRE(node);
    REQUIRE_FALSE(all.empty());
    CHECK(node->last_validation == all.front().id);  // the newest is the one the node points at
    CHECK(node->version == 1 + static_cast<int64_t>(all.size()));
  }
  CHECK(seen.size() == static_cast<size_t>(kRecorders * kEach));
  auto passing = b.validations().recent_passing_validations("p1", NodeKind::kBaremetal, 1000);
  REQUIRE(passing);
  CHECK(passing->size() == static_cast<size_t>(kRecorders * kEach));
  auto last = b.events().last_event_seq();
  REQUIRE(last);
  CHECK(*last == kNodes + kRecorders * kEach);
}

TEMPLATE_TEST_CASE("conformance: free nodes by profile and kind", "[store][conformance][validations]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  add_node(b, "a", "p1");
  add_node(b, "b", "p1");
  add_node(b, "v", "p1", NodeKind::kVirtual);
  add_node(b, "m", "p1");
  add_node(b, "busy", "p1", NodeKind::kBaremetal, ProvisionState::kActive);
  REQUIRE(b.nodes().update_node_if("m", {}, [](Node& x) {
    x.maintenance = true;
    return ok_status();
  }, {}));
  add_node(b, "f", "p2");
  REQUIRE(b.nodes().update_node_if("f", {}, [](Node& x) {
    x.fault = "power_failure";
    return ok_status();
  }, {}));
  auto free = b.nodes().count_free_nodes();
  REQUIRE(free);
  CHECK(free->at({"p1", NodeKind::kBaremetal}) == 2);
  CHECK(free->at({"p1", NodeKind::kVirtual}) == 1);
  CHECK(free->count({"p2", NodeKind::kBaremetal}) == 0);
}

// A node's next tenant reads only the reports of its own period: the rule of
// ValidationStore (finished after the node joined the tenant's allocation,
// while a member), the same on both engines. Staff ("") read every report.
TEMPLATE_TEST_CASE("conformance: validation records: a tenant reads only its own period's reports of a node it holds",
                   "[store][conformance][validations][tenancy]", KILN_STORE_BACKENDS) {
  TestType b;
  ValidationStore& s = b.validations();
  for (const char* t : {"acme", "zeta"})
    REQUIRE(b.tenants().create_tenant(Tenant{t, "", {{"p1", NodeKind::kBaremetal, 5}}, 0, 0, 0}));
  Node n = add_node(b, "n1", "p1");
  auto ids = [](const Result<std::vector<ValidationRecord>>& r) {
    REQUIRE(r);
    std::vector<std::string> out;
    for (const ValidationRecord& v : *r) out.push_back(v.id);
    return out;
  };
  auto claim = [&](const std::string& tenant) {
    Allocation a;
    a.id = "00000000-0000-4000-8000-00000000000" + std::string(tenant == "acme" ? "1" : "2");
    a.name = "train";
    a.tenant = tenant;
    a.profile = "p1";
    a.kind = NodeKind::kBaremetal;
    a.count = 1;
    a.image = "img";
    a.state = AllocationState::kPending;
    auto made = b.allocations().create_allocation(a, {}, nullptr);
    REQUIRE(made);
    return *made;
  };

  // R0: the pool's (burn-in) report, before anyone holds the node.
  b.clock.advance_ms(10);
  auto r0 = s.record_validation(record(n, "pass", 1), {});
  REQUIRE(r0);
  b.clock.advance_ms(10);
  Allocation a = claim("acme");
  // The claim clears the pointer: no report is acme's yet.
  CHECK(b.nodes().get_node(n.id)->last_validation.empty());
  CHECK(ids(s.list_validations(n.id, "acme", 10, "")).empty());
  CHECK(s.get_validation(r0->id, "acme").error().code == Code::kNotFound);
  // R1: run in acme's period.
  b.clock.advance_ms(10);
  auto r1 = s.record_validation(record(n, "pass", 2), {});
  REQUIRE(r1);
  CHECK(b.nodes().get_node(n.id)->last_validation == r1->id);
  CHECK(ids(s.list_validations(n.id, "acme", 10, "")) == std::vector<std::string>{r1->id});
  CHECK(s.get_validation(r1->id, "acme")->id == r1->id);
  CHECK(s.get_validation(r1->id, "zeta").error().code == Code::kNotFound);  // not zeta's node
  CHECK(ids(s.list_validations(n.id, "zeta", 10, "")).empty());
  // Leaving (cleaning under way): still acme's node, still its reports.
  b.clock.advance_ms(10);
  REQUIRE(b.allocations().leave_member(a.id, n.id, MemberStatus::kLeaving, "released", false, {}, nullptr));
  CHECK(ids(s.list_validations(n.id, "acme", 10, "")) == std::vector<std::string>{r1->id});
  // Left: acme reads none of the node's reports any more.
  b.clock.advance_ms(10);
  REQUIRE(b.allocations().leave_member(a.id, n.id, MemberStatus::kLeft, "released", false, {}, nullptr));
  CHECK(ids(s.list_validations(n.id, "acme", 10, "")).empty());
  CHECK(s.get_validation(r1->id, "acme").error().code == Code::kNotFound);

  // zeta gets the same node: R2 is its own; R0 and R1 are not.
  b.clock.advance_ms(10);
  claim("zeta");
  CHECK(b.nodes().get_node(n.id)->last_validation.empty());
  b.clock.advance_ms(10);
  auto r2 = s.record_validation(record(n, "fail", 3), {});
  REQUIRE(r2);
  CHECK(b.nodes().get_node(n.id)->last_validation == r2->id);
  CHECK(ids(s.list_validations(n.id, "zeta", 10, "")) == std::vector<std::string>{r2->id});
  CHECK(s.get_validation(r2->id, "zeta")->id == r2->id);
  CHECK(s.get_validation(r1->id, "zeta").error().code == Code::kNotFound);
  CHECK(s.get_validation(r0->id, "zeta").error().code == Code::kNotFound);
  CHECK(ids(s.list_validations(n.id, "acme", 10, "")).empty());
  CHECK(s.get_validation(r2->id, "acme").error().code == Code::kNotFound);
  // Pages of a tenant's list stay inside its period.
  b.clock.advance_ms(10);
  auto r3 = s.record_validation(record(n, "pass", 4), {});
  REQUIRE(r3);
  CHECK(ids(s.list_validations(n.id, "zeta", 1, "")) == std::vector<std::string>{r3->id});
  CHECK(ids(s.list_validations(n.id, "zeta", 1, r3->id)) == std::vector<std::string>{r2->id});
  CHECK(ids(s.list_validations(n.id, "zeta", 1, r2->id)).empty());
  // Staff read everything, newest first.
  CHECK(ids(s.list_validations(n.id, "", 10, "")) ==
        std::vector<std::string>{r3->id, r2->id, r1->id, r0->id});
  for (const std::string& id : {r0->id, r1->id, r2->id}) CHECK(s.get_validation(id, "")->id == id);
}
