// list_nodes: filters, every sort key in both directions, keyset pagination
// visiting each node exactly once, ports filled, bad marker / sort refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <tuple>

#include "common/ids.h"
#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Walks every page of a listing; fails on a page that is too long.
std::vector<Node> walk(NodeStore& s, const NodeFilter& filter, ListOptions opts, int* pages = nullptr) {
  std::vector<Node> all;
  int n = 0;
  for (;;) {
    auto page = s.list_nodes(filter, opts);
    REQUIRE(page);
    REQUIRE(static_cast<int>(page->size()) <= opts.limit);
    ++n;
    if (page->empty()) break;
    all.insert(all.end(), page->begin(), page->end());
    opts.marker = page->back().id;
    if (static_cast<int>(page->size()) < opts.limit) break;
    REQUIRE(n < 10000);
  }
  if (pages != nullptr) *pages = n;
  return all;
}

std::vector<std::string> ids(const std::vector<Node>& nodes) {
  std::vector<std::string> out;
  for (const Node& n : nodes) out.push_back(n.id);
  return out;
}

// The order the store must produce, computed independently.
std::vector<std::string> expected_order(std::vector<Node> nodes, const std::string& key, bool desc) {
  auto sort_value = [&](const Node& n) -> std::tuple<int64_t, std::string> {
    if (key == "created_at") return {n.created_at, ""};
    if (key == "updated_at") return {n.updated_at, ""};
    if (key == "name") return {0, n.name};
    if (key == "provision_state") return {0, std::string(to_string(n.provision_state))};
    return {0, ""};
  };
  std::sort(nodes.begin(), nodes.end(), [&](const Node& a, const Node& b) {
    auto ka = std::tuple_cat(sort_value(a), std::make_tuple(a.id));
    auto kb = std::tuple_cat(sort_value(b), std::make_tuple(b.id));
    return desc ? kb < ka : ka < kb;
  });
  return ids(nodes);
}

const ProvisionState kStates[] = {ProvisionState::kAvailable, ProvisionState::kActive, ProvisionState::kEnroll,
                                  ProvisionState::kDeploying, ProvisionState::kManageable};

// 250 nodes; pairs share a created_at so ties are broken by id; a third have no
// name; a mix of states, kinds, profiles, tenants and maintenance; every fifth
// node updated later so updated_at differs from created_at.
std::vector<Node> populate(StoreFixture& f, int count = 250) {
  std::vector<Node> nodes;
  for (int i = 0; i < count; ++i) {
    if (i % 2 == 0) f.clock.advance_ms(1);
    Node n = make_node(i % 3 == 0 ? "" : "node-" + std::to_string(1000 - i));
    n.ports.push_back(Port{"", "", "aa:bb:" + std::to_string(100000 + i), true, 0});
    n.provision_state = kStates[i % 5];
    n.kind = i % 4 == 0 ? NodeKind::kVirtual : NodeKind::kBaremetal;
    n.profile = i % 2 == 0 ? "h100" : "a100";
    n.tenant = i % 7 == 0 ? "acme" : "";
    n.maintenance = i % 10 == 0;
    auto r = f.store->create_node(n, event("node.created"));
    REQUIRE(r);
    nodes.push_back(*r);
  }
  for (size_t i = 0; i < nodes.size(); i += 5) {
    f.clock.advance_ms(3);
    auto r = f.store->update_node_if(nodes[i].id, NodeCondition{}, [](Node&) { return ok_status(); }, {});
    REQUIRE(r);
    nodes[i] = *r;
  }
  return nodes;
}

}  // namespace

TEST_CASE("pagination visits every node exactly once, in order", "[store][list]") {
  StoreFixture f;
  std::vector<Node> nodes = populate(f);

  SECTION("default: created_at ascending, limit 100") {
    int pages = 0;
    auto all = walk(*f.store, {}, ListOptions{100, "", "created_at", false}, &pages);
    CHECK(pages == 3);
    CHECK(all.size() == 250);
    std::vector<std::string> got = ids(all);
    CHECK(std::set<std::string>(got.begin(), got.end()).size() == 250);
    CHECK(ids(all) == expected_order(nodes, "created_at", false));
    // Ports come with every node of the page.
    for (const Node& n : all) {
      REQUIRE(n.ports.size() == 1);
      CHECK(n.ports[0].node_id == n.id);
    }
  }
  SECTION("an exact multiple of the limit ends with an empty page") {
    int pages = 0;
    auto all = walk(*f.store, {}, ListOptions{50, "", "id", false}, &pages);
    CHECK(pages == 6);
    CHECK(all.size() == 250);
  }
  for (const std::string key : {"created_at", "updated_at", "name", "provision_state", "id"}) {
    for (bool desc : {false, true}) {
      DYNAMIC_SECTION("sort " << key << (desc ? " desc" : " asc")) {
        auto all = walk(*f.store, {}, ListOptions{37, "", key, desc});
        CHECK(ids(all) == expected_order(nodes, key, desc));
      }
    }
  }
}

TEST_CASE("filters, alone and combined, with pagination", "[store][list]") {
  StoreFixture f;
  std::vector<Node> nodes = populate(f);

  auto expect = [&](const NodeFilter& filter, auto pred) {
    std::vector<Node> want;
    for (const Node& n : nodes)
      if (pred(n)) want.push_back(n);
    REQUIRE(!want.empty());
    auto got = walk(*f.store, filter, ListOptions{9, "", "created_at", true});
    CHECK(ids(got) == expected_order(want, "created_at", true));
  };
  expect(NodeFilter{ProvisionState::kAvailable, {}, {}, {}, {}},
         [](const Node& n) { return n.provision_state == ProvisionState::kAvailable; });
  expect(NodeFilter{{}, NodeKind::kVirtual, {}, {}, {}}, [](const Node& n) { return n.kind == NodeKind::kVirtual; });
  expect(NodeFilter{{}, {}, std::string("h100"), {}, {}}, [](const Node& n) { return n.profile == "h100"; });
  expect(NodeFilter{{}, {}, {}, true, {}}, [](const Node& n) { return n.maintenance; });
  expect(NodeFilter{{}, {}, {}, false, {}}, [](const Node& n) { return !n.maintenance; });
  expect(NodeFilter{{}, {}, {}, {}, std::string("acme")}, [](const Node& n) { return n.tenant == "acme"; });
  expect(NodeFilter{{}, {}, {}, {}, std::string("")}, [](const Node& n) { return n.tenant.empty(); });
  expect(NodeFilter{ProvisionState::kAvailable, NodeKind::kVirtual, std::string("h100"), true, {}},
         [](const Node& n) {
           return n.provision_state == ProvisionState::kAvailable && n.kind == NodeKind::kVirtual &&
                  n.profile == "h100" && n.maintenance;
         });
  expect(NodeFilter{ProvisionState::kActive, {}, std::string("a100"), false, std::string("")},
         [](const Node& n) {
           return n.provision_state == ProvisionState::kActive && n.profile == "a100" && !n.maintenance &&
                  n.tenant.empty();
         });

  auto none = f.store->list_nodes(NodeFilter{{}, {}, std::string("nope"), {}, {}}, ListOptions{});
  REQUIRE(none);
  CHECK(none->empty());
}

TEST_CASE("list_nodes refuses an unknown marker, sort key or limit", "[store][list]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("a"), event("node.created")));

  auto m = f.store->list_nodes({}, ListOptions{10, new_uuid(), "created_at", false});
  REQUIRE_FALSE(m);
  CHECK(m.error().code == Code::kInvalidArgument);
  CHECK(m.error().fields.at(0).field == "marker");

  auto s = f.store->list_nodes({}, ListOptions{10, "", "bmc_password_sealed", false});
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kInvalidArgument);
  CHECK(s.error().fields.at(0).field == "sort");

  auto inj = f.store->list_nodes({}, ListOptions{10, "", "id; DROP TABLE nodes", false});
  REQUIRE_FALSE(inj);
  CHECK(inj.error().fields.at(0).field == "sort");

  auto l = f.store->list_nodes({}, ListOptions{0, "", "created_at", false});
  REQUIRE_FALSE(l);
  CHECK(l.error().fields.at(0).field == "limit");
  CHECK(count_nodes(f.path) == 1);
}

TEST_CASE("a marker whose node changed sort value still pages from its new place", "[store][list]") {
  // Keyset semantics: the marker's *current* sort value is used. A node that
  // moves between pages may be seen twice or not at all; the others never are.
  StoreFixture f;
  std::vector<std::string> all;
  for (int i = 0; i < 10; ++i) {
    f.clock.advance_ms(1);
    all.push_back(f.store->create_node(make_node("n" + std::to_string(i)), event("node.created"))->id);
  }
  auto p1 = f.store->list_nodes({}, ListOptions{5, "", "updated_at", false});
  REQUIRE(p1);
  REQUIRE(p1->size() == 5);
  auto p2 = f.store->list_nodes({}, ListOptions{5, p1->back().id, "updated_at", false});
  REQUIRE(p2);
  CHECK(p2->size() == 5);
  CHECK(p2->front().id == all[5]);
}
