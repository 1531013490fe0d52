// The soak's invariant checkers, fed scripted events, samples and documents:
// each passes what kilnd should produce and catches each way it could go
// wrong (a checker that cannot fail proves nothing).
#include <catch2/catch.hpp>

#include "bench/soak/cluster_view.h"
#include "bench/soak/deadline_watch.h"
#include "bench/soak/event_feed.h"
#include "bench/soak/findings.h"
#include "bench/soak/operation_ledger.h"
#include "bench/soak/ownership.h"
#include "bench/soak/usage_audit.h"
#include "common/clock.h"

using namespace kiln::soak;
using nlohmann::json;

namespace {

class ScriptedCluster : public ClusterView {
 public:
  bool disrupted() const override { return down; }
  int64_t recovered_at_ms() const override { return recovered; }
  std::string log_lines_with(const std::string&, std::size_t) const override { return ""; }
  bool down = false;
  int64_t recovered = 0;
};

constexpr int64_t kT0 = 1'800'000'000'000;

Event ev(int64_t seq, const std::string& type, const std::string& node, const std::string& from, const std::string& to,
         json detail, int64_t ts = kT0) {
  Event e;
  e.seq = seq;
  e.ts_ms = ts;
  e.type = type;
  e.node = node;
  e.from = from;
  e.to = to;
  e.detail = std::move(detail);
  return e;
}


}  // namespace

TEST_CASE("soak checks: the event sequence must be gap-free and never repeat") {
  CHECK_FALSE(sequence_break(0, 1));
  CHECK_FALSE(sequence_break(41, 42));
  REQUIRE(sequence_break(41, 44));
  CHECK_THAT(*sequence_break(41, 44), Catch::Contains("2 never listed"));
  REQUIRE(sequence_break(41, 41));
  CHECK_THAT(*sequence_break(41, 41), Catch::Contains("listed again"));
  CHECK(sequence_break(41, 12));
}

TEST_CASE("soak checks: the operation ledger passes a normal life and catches an operation run twice") {
  ScriptedCluster cluster;
  Findings f(false);
  OperationLedger ledger(f, cluster);
  SECTION("a verb, its steps, its end, a power action and its result, a restart that resumes") {
    ledger.on_event(ev(1, "provision.transition", "n1", "enroll", "verifying", {{"verb", "manage"}, {"op", "A"}}));
    ledger.on_event(ev(2, "provision.step", "n1", "", "", {{"step", "verify_bmc"}, {"op", "A"}}));
    ledger.on_event(ev(3, "provision.transition", "n1", "verifying", "manageable", {{"outcome", "done"}, {"op", "A"}}));
    ledger.on_event(ev(4, "power.requested", "n1", "off", "on", {{"action", "on"}, {"op", "P"}}));
    ledger.on_event(ev(5, "power.transition", "n1", "off", "on", {{"action", "on"}, {"op", "P"}}));
    ledger.on_event(ev(6, "provision.transition", "n1", "manageable", "cleaning", {{"verb", "provide"}, {"op", "B"}}));
    ledger.on_event(ev(7, "provision.resumed", "n1", "cleaning", "cleaning", {{"op", "C"}, {"previous_op", "B"}}));
    ledger.on_event(ev(8, "provision.step", "n1", "", "", {{"step", "clean"}, {"op", "C"}}));
    ledger.on_event(ev(9, "provision.transition", "n1", "cleaning", "burning_in", {{"outcome", "done"}, {"op", "C"}}));
    ledger.on_event(ev(10, "provision.transition", "n1", "burning_in", "clean_failed",
                       {{"outcome", "timeout"}, {"reason", "timed out"}}));
    ledger.check_complete();
    CHECK(f.ok());
  }
  SECTION("an operation id started twice") {
    ledger.on_event(ev(1, "provision.transition", "n1", "enroll", "verifying", {{"verb", "manage"}, {"op", "A"}}));
    ledger.on_event(ev(2, "provision.transition", "n1", "verifying", "enroll", {{"outcome", "fail"}, {"op", "A"}}));
    ledger.on_event(ev(3, "provision.transition", "n1", "enroll", "verifying", {{"verb", "manage"}, {"op", "A"}}));
    CHECK_THAT(f.first(), Catch::StartsWith("operations-run-once") && Catch::Contains("started twice"));
  }
  SECTION("a step of an operation after it ended (a second runner)") {
    ledger.on_event(ev(1, "provision.transition", "n1", "enroll", "verifying", {{"verb", "manage"}, {"op", "A"}}));
    ledger.on_event(ev(2, "provision.transition", "n1", "verifying", "enroll", {{"outcome", "timeout"}}));
    ledger.on_event(ev(3, "provision.step", "n1", "", "", {{"step", "verify_bmc"}, {"op", "A"}}));
    CHECK_THAT(f.first(), Catch::Contains("does not hold the node"));
  }
  SECTION("a step of the operation a resume replaced") {
    ledger.on_event(ev(1, "provision.transition", "n1", "available", "deploying", {{"verb", "deploy"}, {"op", "A"}}));
    ledger.on_event(ev(2, "provision.resumed", "n1", "deploying", "deploying", {{"op", "B"}, {"previous_op", "A"}}));
    ledger.on_event(ev(3, "provision.step", "n1", "", "", {{"step", "deploy"}, {"op", "A"}}));
    CHECK_FALSE(f.ok());
  }
  SECTION("a state finished twice by one operation") {
    ledger.on_event(ev(1, "provision.transition", "n1", "available", "deploying", {{"verb", "deploy"}, {"op", "A"}}));
    ledger.on_event(ev(2, "provision.transition", "n1", "deploying", "validating", {{"outcome", "done"}, {"op", "A"}}));
    ledger.on_event(ev(3, "provision.transition", "n1", "deploying", "validating", {{"outcome", "done"}, {"op", "A"}}));
    CHECK_THAT(f.first(), Catch::Contains("finished state deploying twice"));
  }
  SECTION("a verb accepted while another operation holds the node") {
    ledger.on_event(ev(1, "provision.transition", "n1", "manageable", "inspecting", {{"verb", "inspect"}, {"op", "A"}}));
    ledger.on_event(ev(2, "power.requested", "n1", "off", "on", {{"action", "on"}, {"op", "P"}}));
    CHECK_THAT(f.first(), Catch::Contains("while operation A held the node"));
  }
  SECTION("a power action with two results, and one with none") {
    ledger.on_event(ev(1, "power.requested", "n1", "off", "on", {{"action", "on"}, {"op", "P"}}));
    ledger.on_event(ev(2, "power.transition", "n1", "off", "on", {{"action", "on"}, {"op", "P"}}));
    ledger.on_event(ev(3, "power.failed", "n1", "off", "unknown", {{"reason", "x"}, {"op", "P"}}));
    CHECK_THAT(f.first(), Catch::Contains("result number 2"));
    Findings g(false);
    OperationLedger other(g, cluster);
    other.on_event(ev(1, "power.requested", "n2", "off", "on", {{"action", "on"}, {"op", "Q"}}));
    other.check_complete();
    CHECK_THAT(g.first(), Catch::Contains("never ended"));
  }
  SECTION("a deploy that reaches active twice") {
    ledger.on_event(ev(1, "provision.transition", "n1", "available", "deploying", {{"verb", "deploy"}, {"op", "A"}}));
    ledger.on_event(ev(2, "provision.transition", "n1", "deploying", "active", {{"outcome", "done"}, {"op", "A"}}));
    ledger.on_event(ev(3, "provision.transition", "n1", "validating", "active", {{"outcome", "done"}}));
    CHECK_THAT(f.first(), Catch::Contains("active twice"));
  }
}

TEST_CASE("soak checks: ownership holds every claim to the tenant's quota and one holder per node") {
  Findings f(false);
  Ownership own(f, {{"acme", 2}, {"globex", 1}});
  auto claim = [&](int64_t seq, const std::string& node, const std::string& alloc, const std::string& name) {
    own.on_event(ev(seq, "node.claimed", node, "", "", {{"allocation", alloc}, {"allocation_name", name}}));
  };
  auto release = [&](int64_t seq, const std::string& node, const std::string& alloc, const std::string& name) {
    own.on_event(ev(seq, "node.released", node, "", "", {{"allocation", alloc}, {"allocation_name", name}}));
  };
  claim(1, "n1", "a1", "acme-1");
  claim(2, "n2", "a1", "acme-1");
  release(3, "n1", "a1", "acme-1");
  claim(4, "n3", "a2", "acme-2");
  CHECK(f.ok());
  CHECK(own.owner_at("n1", 1) == "acme");
  CHECK(own.owner_at("n1", 3) == "acme");
  CHECK(own.owner_at("n1", 4).empty());
  CHECK(own.holder("n2") == "acme");
  CHECK(own.allocation_tenant("a2") == "acme");
  SECTION("over quota") {
    claim(5, "n4", "a2", "acme-2");
    CHECK_THAT(f.first(), Catch::StartsWith("quota-never-exceeded") && Catch::Contains("acme holds 3"));
  }
  SECTION("a node claimed while another tenant holds it") {
    claim(5, "n2", "b1", "globex-1");
    CHECK_THAT(f.first(), Catch::StartsWith("tenant-isolation") && Catch::Contains("while allocation a1"));
  }
  SECTION("a node released by an allocation that does not hold it") {
    release(5, "n2", "b1", "globex-1");
    CHECK_THAT(f.first(), Catch::StartsWith("tenant-isolation"));
  }
}

TEST_CASE("soak checks: a node past its state's timeout is caught, with slack and after a disruption") {
  ScriptedCluster cluster;
  Findings f(false);
  StateTimeouts t;
  t.fallback = std::chrono::seconds(30);
  t.by_state = {{"cleaning", std::chrono::seconds(15)}};
  DeadlineWatch watch(f, cluster, t, std::chrono::milliseconds(5000));
  watch.on_event(ev(1, "provision.transition", "n1", "manageable", "cleaning", {{"verb", "provide"}, {"op", "A"}}, kT0));
  const json nodes = json::array({{{"id", "n1"}, {"name", "ops-1"}, {"provision_state", "cleaning"}}});
  watch.check(nodes, kT0 + 19'000);  // 15 s + 5 s slack not yet over
  CHECK(f.ok());
  cluster.down = true;
  watch.check(nodes, kT0 + 60'000);  // nobody can sweep it now
  CHECK(f.ok());
  cluster.down = false;
  cluster.recovered = kT0 + 58'000;
  watch.check(nodes, kT0 + 60'000);  // back 2 s ago: within the slack
  CHECK(f.ok());
  watch.check(nodes, kT0 + 64'000);
  CHECK_THAT(f.first(), Catch::StartsWith("no-transient-past-deadline") && Catch::Contains("its timeout is 15 s"));
  // A node that left the state and came back is judged by its new entry.
  Findings g(false);
  DeadlineWatch again(g, cluster, t, std::chrono::milliseconds(5000));
  again.on_event(ev(1, "provision.transition", "n1", "manageable", "cleaning", {}, kT0));
  again.on_event(ev(2, "provision.transition", "n1", "cleaning", "clean_failed", {}, kT0 + 15'000));
  again.on_event(ev(3, "provision.transition", "n1", "manageable", "cleaning", {}, kT0 + 70'000));
  again.check(nodes, kT0 + 75'000);
  CHECK(g.ok());
}

namespace {

std::string at(int64_t ms) { return kiln::format_rfc3339(ms); }

// An allocation that became ready at +10 s and was released at +70 s, with
// two members, n2 replaced by n3 at +30 s (ready again at +40 s).
json allocations() {
  json a = {{"id", "a1"},
            {"name", "acme-1"},
            {"tenant", "acme"},
            {"history", json::array({{{"at", at(kT0)}, {"to", "pending"}},
                                     {{"at", at(kT0 + 1'000)}, {"to", "provisioning"}},
                                     {{"at", at(kT0 + 10'000)}, {"to", "ready"}},
                                     {{"at", at(kT0 + 31'000)}, {"to", "provisioning"}},
                                     {{"at", at(kT0 + 40'000)}, {"to", "ready"}},
                                     {{"at", at(kT0 + 70'000)}, {"to", "releasing"}},
                                     {{"at", at(kT0 + 80'000)}, {"to", "released"}}})},
            {"nodes", json::array()},
            {"former_nodes",
             json::array({{{"id", "n1"}, {"joined_at", at(kT0)}, {"left_at", at(kT0 + 78'000)}, {"reason", "released"}},
                          {{"id", "n2"}, {"joined_at", at(kT0)}, {"left_at", at(kT0 + 30'050)},
                           {"reason", "replaced: deploy failed"}},
                          {{"id", "n3"}, {"joined_at", at(kT0 + 30'050)}, {"left_at", at(kT0 + 79'000)},
                           {"reason", "released"}}})}};
  return {{"allocations", json::array({a})}};
}

json row(const std::string& node, int64_t start, int64_t end) {
  return {{"allocation", "a1"}, {"node", node}, {"tenant", "acme"}, {"started_at", at(start)},
          {"ended_at", end == 0 ? json(nullptr) : json(at(end))}, {"seconds", end == 0 ? 0 : (end - start) / 1000}};
}

json usage(json rows) {
  int64_t sum = 0;
  for (const json& r : rows) sum += r["seconds"].get<int64_t>();
  return {{"usage", rows}, {"totals", {{"allocations", {{"a1", {{"seconds", sum}}}}}}}};
}

}  // namespace

TEST_CASE("soak checks: usage rows must span each member's metered lifetime") {
  Findings f(false);
  const json good = json::array({row("n1", kT0 + 10'000, kT0 + 70'000), row("n2", kT0 + 10'000, kT0 + 30'000),
                                 row("n3", kT0 + 40'000, kT0 + 70'000)});
  SECTION("the bill as the rule makes it") {
    json figures = audit_usage_documents(allocations(), usage(good), f);
    CHECK(f.ok());
    CHECK(figures["billed_seconds"] == 60 + 20 + 30);
  }
  SECTION("a row that starts before the allocation was ready") {
    json rows = good;
    rows[0] = row("n1", kT0 + 9'999, kT0 + 70'000);
    audit_usage_documents(allocations(), usage(rows), f);
    CHECK_THAT(f.first(), Catch::StartsWith("usage-equals-metered-lifetime") && Catch::Contains("became ready at"));
  }
  SECTION("a row still open, a missing row, a row for a stranger, a wrong total") {
    json rows = good;
    rows[0] = row("n1", kT0 + 10'000, 0);
    audit_usage_documents(allocations(), usage(rows), f);
    CHECK_THAT(f.first(), Catch::Contains("still open"));
    Findings g(false);
    audit_usage_documents(allocations(), usage(json::array({good[0], good[1]})), g);
    CHECK_THAT(g.first(), Catch::Contains("n3 has 0 usage rows"));
    Findings h(false);
    json more = good;
    more.push_back(row("n9", kT0 + 10'000, kT0 + 70'000));
    audit_usage_documents(allocations(), usage(more), h);
    CHECK_THAT(h.first(), Catch::Contains("never was its member"));
    Findings k(false);
    json u = usage(good);
    u["totals"]["allocations"]["a1"]["seconds"] = 111;
    audit_usage_documents(allocations(), u, k);
    CHECK_THAT(k.first(), Catch::Contains("rows add up to 110"));
  }
  SECTION("a row that ends after the release, or a replaced member billed past its leaving") {
    json rows = good;
    rows[0] = row("n1", kT0 + 10'000, kT0 + 75'000);
    audit_usage_documents(allocations(), usage(rows), f);
    CHECK_THAT(f.first(), Catch::Contains("neither a give-back entry"));
    Findings g(false);
    rows = good;
    rows[1] = row("n2", kT0 + 10'000, kT0 + 30'100);
    audit_usage_documents(allocations(), usage(rows), g);
    CHECK_FALSE(g.ok());
  }
}
