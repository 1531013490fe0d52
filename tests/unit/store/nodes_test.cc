// Node CRUD and the conditional update on SQLite: duplicates refused with
// the offending field and nothing written, every NodeCondition failing cleanly.
#include <catch2/catch.hpp>

#include "common/ids.h"
#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
// Records every listener call.
struct Listener {
  std::vector<int64_t> seqs;
  void attach(NodeStore& s) {
    s.set_event_listener([this](int64_t seq) { seqs.push_back(seq); });
  }
};
}  // namespace

// Field round-trips (every column, defaults and NULLs) run on SQLite and
// PostgreSQL alike in conformance/nodes_conformance_test.cc.

TEST_CASE("get_node of an unknown id or name is kNotFound", "[store][nodes]") {
  StoreFixture f;
  auto a = f.store->get_node(new_uuid());
  REQUIRE_FALSE(a);
  CHECK(a.error().code == Code::kNotFound);
  auto b = f.store->get_node("nope");
  REQUIRE_FALSE(b);
  CHECK(b.error().code == Code::kNotFound);
  auto c = f.store->get_node("");
  REQUIRE_FALSE(c);
  CHECK(c.error().code == Code::kNotFound);
}

TEST_CASE("a duplicate name is kConflict on /name and writes nothing", "[store][nodes]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("dup", {"aa:00:00:00:00:01"}), event("node.created")));
  int64_t nodes = count_nodes(f.path), events = count_events(f.path);
  Listener l;
  l.attach(*f.store);

  auto r = f.store->create_node(make_node("dup", {"aa:00:00:00:00:02"}), event("node.created"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kConflict);
  REQUIRE(r.error().fields.size() == 1);
  CHECK(r.error().fields[0].field == "/name");
  CHECK(count_nodes(f.path) == nodes);
  CHECK(count_events(f.path) == events);
  CHECK(sql_int(f.path, "SELECT count(*) FROM ports") == 1);
  CHECK(l.seqs.empty());
}

TEST_CASE("a duplicate MAC is kConflict on /ports/N/address and writes nothing", "[store][nodes]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("a", {"aa:00:00:00:00:01"}), event("node.created")));
  int64_t nodes = count_nodes(f.path), events = count_events(f.path);

  SECTION("against another node's port") {
    auto r = f.store->create_node(make_node("b", {"aa:00:00:00:00:09", "aa:00:00:00:00:01"}), event("node.created"));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Code::kConflict);
    REQUIRE(r.error().fields.size() == 1);
    CHECK(r.error().fields[0].field == "/ports/1/address");
  }
  SECTION("repeated inside the new node") {
    auto r = f.store->create_node(make_node("b", {"aa:00:00:00:00:07", "aa:00:00:00:00:08", "aa:00:00:00:00:07"}),
                                  event("node.created"));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Code::kConflict);
    REQUIRE(r.error().fields.size() == 1);
    CHECK(r.error().fields[0].field == "/ports/2/address");
  }
  CHECK(count_nodes(f.path) == nodes);
  CHECK(count_events(f.path) == events);
  CHECK(sql_int(f.path, "SELECT count(*) FROM ports") == 1);
  CHECK_FALSE(f.store->get_node("b"));
}

TEST_CASE("create_node refuses a non-UUID id and a UUID-like name", "[store][nodes]") {
  StoreFixture f;
  Node n = make_node("x");
  n.id = "not-a-uuid";
  auto r = f.store->create_node(n, event("node.created"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kInvalidArgument);
  auto s = f.store->create_node(make_node(new_uuid()), event("node.created"));
  REQUIRE_FALSE(s);
  CHECK(s.error().fields.at(0).field == "/name");
  CHECK(count_nodes(f.path) == 0);

  // A caller-chosen id and version are kept.
  Node m = make_node("chosen");
  m.id = new_uuid();
  m.version = 7;
  auto c = f.store->create_node(m, event("node.created"));
  REQUIRE(c);
  CHECK(c->id == m.id);
  CHECK(f.store->get_node(m.id)->version == 7);
}

TEST_CASE("update_node_if writes, bumps version and appends events", "[store][nodes]") {
  StoreFixture f;
  Node base = make_node("n1", {"aa:00:00:00:00:01"});
  base.tenant = "acme";
  auto created = f.store->create_node(base, event("node.created"));
  REQUIRE(created);
  Listener l;
  l.attach(*f.store);
  f.clock.advance_ms(5000);

  EventDraft e1 = event("provision.transition");
  e1.from_state = "enroll";
  e1.to_state = "verifying";
  EventDraft e2 = event("power.changed");
  e2.node_id = "explicit";
  e2.tenant = "other";
  auto r = f.store->update_node_if(
      "n1", NodeCondition{1, std::string(""), ProvisionState::kEnroll},
      [](Node& n) {
        n.provision_state = ProvisionState::kVerifying;
        n.reservation = "op-7";
        n.name = "n1-renamed";
        // Not the caller's to change: the store puts these back.
        n.id = "not-the-id";
        n.version = 99;
        n.created_at = 1;
        n.ports.clear();
        return ok_status();
      },
      {e1, e2});
  REQUIRE(r);
  CHECK(r->version == 2);
  CHECK(r->updated_at == f.clock.now_ms());
  CHECK(r->id == created->id);
  CHECK(r->created_at == created->created_at);
  CHECK(r->ports.size() == 1);

  auto got = f.store->get_node(created->id);
  REQUIRE(got);
  CHECK(got->version == 2);
  CHECK(got->name == "n1-renamed");
  CHECK(got->provision_state == ProvisionState::kVerifying);
  CHECK(got->reservation == "op-7");
  CHECK(got->ports.size() == 1);
  CHECK_FALSE(f.store->get_node("n1"));

  auto events = f.store->list_events(0, 10, std::nullopt, std::nullopt);
  REQUIRE(events);
  REQUIRE(events->size() == 3);
  CHECK(events->at(1).type == "provision.transition");
  CHECK(events->at(1).node_id == created->id);
  CHECK(events->at(1).tenant == "acme");
  CHECK(events->at(1).from_state == "enroll");
  CHECK(events->at(1).to_state == "verifying");
  CHECK(events->at(1).ts == f.clock.now_ms());
  CHECK(events->at(2).node_id == "explicit");
  CHECK(events->at(2).tenant == "other");
  CHECK(events->at(0).seq < events->at(1).seq);
  CHECK(events->at(1).seq < events->at(2).seq);
  // One notification per commit, with the highest seq.
  CHECK(l.seqs == std::vector<int64_t>{events->at(2).seq});
}

TEST_CASE("update_node_if with a failing condition writes nothing", "[store][nodes]") {
  StoreFixture f;
  Node base = make_node("n1");
  base.reservation = "op-1";
  REQUIRE(f.store->create_node(base, event("node.created")));
  Listener l;
  l.attach(*f.store);
  int64_t seq = *f.store->last_event_seq();
  bool mutated = false;
  auto mutate = [&](Node& n) {
    mutated = true;
    n.last_error = "should not be written";
    return ok_status();
  };

  Error err;
  SECTION("version") {
    auto r = f.store->update_node_if("n1", NodeCondition{5, {}, {}}, mutate, {event("x")});
    REQUIRE_FALSE(r);
    err = r.error();
    CHECK(err.code == Code::kPreconditionFailed);
    CHECK(err.message == "node was modified (version 1, If-Match 5)");
  }
  SECTION("reservation: wants free, is held") {
    auto r = f.store->update_node_if("n1", NodeCondition{{}, std::string(""), {}}, mutate, {event("x")});
    REQUIRE_FALSE(r);
    err = r.error();
    CHECK(err.code == Code::kConflict);
    CHECK(err.message == "node is busy: locked by operation op-1");
  }
  SECTION("reservation: held by someone else now") {
    auto r = f.store->update_node_if("n1", NodeCondition{{}, std::string("op-2"), {}}, mutate, {event("x")});
    REQUIRE_FALSE(r);
    err = r.error();
    CHECK(err.code == Code::kConflict);
    CHECK(err.message == "node is no longer held by operation op-2");
  }
  SECTION("provision state") {
    auto r = f.store->update_node_if("n1", NodeCondition{{}, {}, ProvisionState::kAvailable}, mutate, {event("x")});
    REQUIRE_FALSE(r);
    err = r.error();
    CHECK(err.code == Code::kConflict);
    CHECK(err.message == "node is in state enroll, not available");
  }
  SECTION("unknown node") {
    auto r = f.store->update_node_if(new_uuid(), NodeCondition{}, mutate, {event("x")});
    REQUIRE_FALSE(r);
    err = r.error();
    CHECK(err.code == Code::kNotFound);
  }
  CHECK_FALSE(mutated);
  auto got = f.store->get_node("n1");
  REQUIRE(got);
  CHECK(got->version == 1);
  CHECK(got->last_error.empty());
  CHECK(*f.store->last_event_seq() == seq);
  CHECK(l.seqs.empty());
}

TEST_CASE("update_node_if: an Error from mutate aborts and is returned as is", "[store][nodes]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("n1"), event("node.created")));
  int64_t seq = *f.store->last_event_seq();
  auto r = f.store->update_node_if(
      "n1", NodeCondition{},
      [](Node& n) -> Status {
        n.last_error = "half-done";
        return Error(Code::kUnprocessable, "cannot", {FieldError{"/target", "bad"}});
      },
      {event("x")});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnprocessable);
  CHECK(r.error().message == "cannot");
  CHECK(r.error().fields.at(0).field == "/target");
  auto got = f.store->get_node("n1");
  CHECK(got->version == 1);
  CHECK(got->last_error.empty());
  CHECK(*f.store->last_event_seq() == seq);
}

TEST_CASE("update_node_if: renaming onto a taken name is kConflict on /name", "[store][nodes]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("a"), event("node.created")));
  REQUIRE(f.store->create_node(make_node("b"), event("node.created")));
  int64_t events = count_events(f.path);
  auto r = f.store->update_node_if(
      "b", NodeCondition{},
      [](Node& n) {
        n.name = std::string("a");  // not = "a": a GCC 12 -Wrestrict false positive at -O2
        return ok_status();
      },
      {event("x")});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kConflict);
  CHECK(r.error().fields.at(0).field == "/name");
  CHECK(f.store->get_node("b")->version == 1);
  CHECK(count_events(f.path) == events);
}

TEST_CASE("writing from inside mutate is refused instead of deadlocking", "[store][nodes]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("n1"), event("node.created")));
  Status inner;
  auto r = f.store->update_node_if(
      "n1", NodeCondition{},
      [&](Node&) {
        inner = f.store->create_node(make_node("n2"), event("node.created")).ok()
                    ? ok_status()
                    : Status(Error(Code::kInternal, "refused"));
        // Reading is fine: it uses the reader pool.
        CHECK(f.store->get_node("n1"));
        return ok_status();
      },
      {});
  REQUIRE(r);
  CHECK_FALSE(inner);
  CHECK_FALSE(f.store->get_node("n2"));
}

TEST_CASE("delete_node_if removes the node and its ports", "[store][nodes]") {
  StoreFixture f;
  Node base = make_node("n1", {"aa:00:00:00:00:01"});
  base.tenant = "acme";
  auto created = f.store->create_node(base, event("node.created"));
  REQUIRE(created);

  auto refused = f.store->delete_node_if("n1", NodeCondition{{}, {}, ProvisionState::kManageable},
                                         event("node.deleted"));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Code::kConflict);
  CHECK(f.store->get_node("n1"));
  CHECK(count_events(f.path) == 1);

  REQUIRE(f.store->delete_node_if("n1", NodeCondition{1, std::string(""), {}}, event("node.deleted")));
  CHECK(f.store->get_node(created->id).error().code == Code::kNotFound);
  CHECK(f.store->find_port_by_address("aa:00:00:00:00:01").error().code == Code::kNotFound);
  auto events = f.store->list_events(0, 10, std::nullopt, std::nullopt);
  REQUIRE(events->size() == 2);
  CHECK(events->at(1).type == "node.deleted");
  CHECK(events->at(1).node_id == created->id);
  CHECK(events->at(1).tenant == "acme");
  // The MAC is free again.
  CHECK(f.store->create_node(make_node("n1", {"aa:00:00:00:00:01"}), event("node.created")));

  CHECK(f.store->delete_node_if(new_uuid(), NodeCondition{}, event("node.deleted")).error().code ==
        Code::kNotFound);
}

TEST_CASE("nodes_past_deadline, nodes_in_flight, count_nodes_by_state", "[store][nodes]") {
  StoreFixture f;
  auto add = [&](const std::string& name, ProvisionState st, int64_t deadline, const std::string& reservation) {
    Node n = make_node(name, {});
    n.provision_state = st;
    n.deadline_at = deadline;
    n.reservation = reservation;
    auto r = f.store->create_node(n, event("node.created"));
    REQUIRE(r);
  };
  add("idle", ProvisionState::kAvailable, 0, "");
  add("late2", ProvisionState::kDeploying, 2000, "");
  add("late1", ProvisionState::kCleaning, 1000, "op-a");
  add("future", ProvisionState::kInspecting, 9000, "");
  add("locked", ProvisionState::kManageable, 0, "op-b");
  add("active", ProvisionState::kActive, 0, "");

  auto late = f.store->nodes_past_deadline(5000, 10);
  REQUIRE(late);
  REQUIRE(late->size() == 2);
  CHECK(late->at(0).name == "late1");
  CHECK(late->at(1).name == "late2");
  CHECK(f.store->nodes_past_deadline(5000, 1)->size() == 1);
  CHECK(f.store->nodes_past_deadline(1000, 10)->empty());  // strictly earlier

  auto flight = f.store->nodes_in_flight();
  REQUIRE(flight);
  std::vector<std::string> names;
  for (const Node& n : *flight) names.push_back(n.name);
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"future", "late1", "late2", "locked"});

  auto counts = f.store->count_nodes_by_state();
  REQUIRE(counts);
  CHECK(counts->size() == std::size(kAllProvisionStates));
  CHECK(counts->at("available") == 1);
  CHECK(counts->at("deploying") == 1);
  CHECK(counts->at("active") == 1);
  CHECK(counts->at("enroll") == 0);
}
