// Ports, the event log, the audit log and tokens.
#include <catch2/catch.hpp>

#include "common/ids.h"
#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("ports: create, find, list, delete", "[store][ports]") {
  StoreFixture f;
  auto node = f.store->create_node(make_node("n1", {"aa:00:00:00:00:01"}), event("node.created"));
  REQUIRE(node);
  auto other = f.store->create_node(make_node("n2"), event("node.created"));
  REQUIRE(other);

  SECTION("unknown node is kNotFound on /node") {
    auto r = f.store->create_port(Port{"", new_uuid(), "aa:00:00:00:00:02", true, 0}, event("port.created"));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Code::kNotFound);
    CHECK(r.error().fields.at(0).field == "/node");
    CHECK(sql_int(f.path, "SELECT count(*) FROM ports") == 1);
  }
  SECTION("duplicate MAC is kConflict on /address, nothing written") {
    int64_t events = count_events(f.path);
    auto r = f.store->create_port(Port{"", other->id, "aa:00:00:00:00:01", true, 0}, event("port.created"));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == Code::kConflict);
    CHECK(r.error().fields.at(0).field == "/address");
    CHECK(count_events(f.path) == events);
    CHECK(f.store->get_node("n2")->version == 1);
  }
  SECTION("create, look up and delete") {
    f.clock.advance_ms(10);
    auto p = f.store->create_port(Port{"", "n2", "AA:00:00:00:00:03", false, 0}, event("port.created"));
    REQUIRE(p);
    CHECK(is_uuid(p->id));
    CHECK(p->node_id == other->id);  // a name resolves to the id
    CHECK(p->created_at == f.clock.now_ms());

    auto got = f.store->get_port(p->id);
    REQUIRE(got);
    CHECK(got->address == "AA:00:00:00:00:03");  // stored exactly as given
    CHECK_FALSE(got->pxe);
    CHECK(f.store->find_port_by_address("AA:00:00:00:00:03")->id == p->id);
    CHECK(f.store->find_port_by_address("aa:00:00:00:00:03").error().code == Code::kNotFound);
    CHECK(f.store->get_port(new_uuid()).error().code == Code::kNotFound);

    // The node's representation changed: version bumped, port listed, event tagged.
    auto n2 = f.store->get_node("n2");
    CHECK(n2->version == 2);
    REQUIRE(n2->ports.size() == 1);
    auto evs = f.store->list_events(0, 10, other->id, std::nullopt);
    REQUIRE(evs->size() == 2);
    CHECK(evs->at(1).type == "port.created");

    REQUIRE(f.store->delete_port(p->id, event("port.deleted")));
    CHECK(f.store->get_port(p->id).error().code == Code::kNotFound);
    CHECK(f.store->get_node("n2")->ports.empty());
    CHECK(f.store->get_node("n2")->version == 3);
    CHECK(f.store->delete_port(p->id, event("port.deleted")).error().code == Code::kNotFound);
  }
  SECTION("list by node and keyset by id") {
    std::vector<std::string> want;
    for (int i = 0; i < 7; ++i) {
      auto p = f.store->create_port(Port{"", other->id, "bb:00:00:00:00:0" + std::to_string(i), true, 0},
                                    event("port.created"));
      REQUIRE(p);
      want.push_back(p->id);
    }
    std::sort(want.begin(), want.end());
    std::vector<std::string> got;
    std::string marker;
    for (;;) {
      auto page = f.store->list_ports(other->id, 3, marker);
      REQUIRE(page);
      for (const Port& p : *page) {
        CHECK(p.node_id == other->id);
        got.push_back(p.id);
      }
      if (page->size() < 3) break;
      marker = page->back().id;
    }
    CHECK(got == want);
    auto everything = f.store->list_ports(std::nullopt, 100, "");
    REQUIRE(everything);
    CHECK(everything->size() == 8);
    CHECK(f.store->list_ports(std::nullopt, 0, "").error().code == Code::kInvalidArgument);
  }
}

TEST_CASE("events: ordered, filtered by node and tenant, paged by seq", "[store][events]") {
  StoreFixture f;
  std::vector<int64_t> notified;
  f.store->set_event_listener([&](int64_t seq) { notified.push_back(seq); });
  CHECK(*f.store->last_event_seq() == 0);

  Node a = make_node("a");
  a.tenant = "t1";
  auto na = f.store->create_node(a, event("node.created"));
  auto nb = f.store->create_node(make_node("b"), event("node.created"));
  REQUIRE(na);
  REQUIRE(nb);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(f.store->update_node_if("a", NodeCondition{}, [](Node&) { return ok_status(); },
                                    {event("tick"), event("tock")}));
    REQUIRE(f.store->update_node_if("b", NodeCondition{}, [](Node&) { return ok_status(); }, {event("tick")}));
  }
  // A write with no events notifies nobody.
  REQUIRE(f.store->update_node_if("b", NodeCondition{}, [](Node&) { return ok_status(); }, {}));

  auto all = f.store->list_events(0, 1000, std::nullopt, std::nullopt);
  REQUIRE(all);
  REQUIRE(all->size() == 2 + 5 * 3);
  for (size_t i = 1; i < all->size(); ++i) CHECK(all->at(i).seq > all->at(i - 1).seq);
  CHECK(*f.store->last_event_seq() == all->back().seq);
  REQUIRE(notified.size() == 2 + 5 * 2);
  for (size_t i = 1; i < notified.size(); ++i) CHECK(notified[i] > notified[i - 1]);
  CHECK(notified.back() == all->back().seq);

  auto of_a = f.store->list_events(0, 1000, na->id, std::nullopt);
  CHECK(of_a->size() == 1 + 5 * 2);
  for (const auto& e : *of_a) CHECK(e.node_id == na->id);
  auto of_t1 = f.store->list_events(0, 1000, std::nullopt, std::string("t1"));
  CHECK(of_t1->size() == 1 + 5 * 2);
  for (const auto& e : *of_t1) CHECK(e.tenant == "t1");
  CHECK(f.store->list_events(0, 1000, nb->id, std::string("t1"))->empty());

  // since is exclusive; limit bounds the page.
  auto page = f.store->list_events(all->at(3).seq, 4, std::nullopt, std::nullopt);
  REQUIRE(page->size() == 4);
  CHECK(page->front().seq == all->at(4).seq);
  CHECK(f.store->list_events(all->back().seq, 10, std::nullopt, std::nullopt)->empty());
  CHECK(f.store->list_events(0, 0, std::nullopt, std::nullopt).error().code == Code::kInvalidArgument);
}

TEST_CASE("seq is never reused, even after the newest event's node is deleted", "[store][events]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("a"), event("node.created")));
  int64_t s1 = *f.store->last_event_seq();
  REQUIRE(f.store->delete_node_if("a", NodeCondition{}, event("node.deleted")));
  REQUIRE(f.store->create_node(make_node("a"), event("node.created")));
  CHECK(*f.store->last_event_seq() == s1 + 2);
}

// The audit log and tokens run on SQLite and PostgreSQL alike in
// conformance/events_conformance_test.cc and access_conformance_test.cc.
