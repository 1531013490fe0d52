// The conductor ring in the store (migration 025_ring_position), on SQLite and
// on PostgreSQL: every node write stores the node's ring position,
// power_sync_nodes reads only the ranges it is given, count_nodes_on_ring
// counts per member without reading rows, and a node without a position (a
// write by a kilnd from before the column) is read by every instance until
// the store places it when it opens.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends.h"
#include "controller/model/ring_position.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Two members, each owning two opposite quarters of the ring: a member's
// positions are two disjoint ranges, as on a real ring.
const std::vector<RingRange> kMemberA = {{INT64_MIN, INT64_MIN / 2 - 1}, {0, INT64_MAX / 2}};
const std::vector<RingRange> kMemberB = {{INT64_MIN / 2, -1}, {INT64_MAX / 2 + 1, INT64_MAX}};

std::vector<RingArc> two_member_arcs() {
  std::vector<RingArc> arcs;
  for (const RingRange& r : kMemberA) arcs.push_back({r, 0});
  for (const RingRange& r : kMemberB) arcs.push_back({r, 1});
  std::sort(arcs.begin(), arcs.end(), [](const RingArc& x, const RingArc& y) { return x.range.first < y.range.first; });
  return arcs;
}

bool on(const std::vector<RingRange>& ranges, int64_t position) {
  return std::any_of(ranges.begin(), ranges.end(),
                     [&](const RingRange& r) { return r.first <= position && position <= r.last; });
}

// Every page of `ranges`, `page_size` at a time, each page after the last
// node of the one before.
template <typename B>
std::vector<PowerSyncNode> read_all(B& b, const std::vector<RingRange>& ranges, int page_size) {
  std::vector<PowerSyncNode> all;
  RingCursor after;
  for (int pages = 0;; ++pages) {
    REQUIRE(pages < 200);
    auto page = b.nodes().power_sync_nodes(ranges, after, page_size);
    REQUIRE(page);
    REQUIRE(page->size() <= static_cast<std::size_t>(page_size));
    for (PowerSyncNode& n : *page) all.push_back(std::move(n));
    if (page->size() < static_cast<std::size_t>(page_size)) return all;
    after = RingCursor::after(all.back());
  }
}

std::set<std::string> ids_of(const std::vector<PowerSyncNode>& nodes) {
  std::set<std::string> out;
  for (const PowerSyncNode& n : nodes) out.insert(n.id);
  CHECK(out.size() == nodes.size());  // none read twice
  return out;
}

// `count` nodes; every third is a member of one of two allocations.
template <typename B>
std::map<std::string, std::string> create_nodes(B& b, int count) {
  std::map<std::string, std::string> allocation_of;
  for (int i = 0; i < count; ++i) {
    Node n = make_node("ring-" + std::to_string(i), {});
    n.provision_state = ProvisionState::kAvailable;
    if (i % 3 == 0) n.allocation = i % 2 == 0 ? "alloc-even" : "alloc-odd";
    auto c = b.nodes().create_node(n, event("node.created"));
    REQUIRE(c);
    allocation_of[c->id] = n.allocation;
  }
  return allocation_of;
}

}  // namespace

TEMPLATE_TEST_CASE("conformance: power_sync_nodes reads only the nodes on the ranges given, each once, in ring order",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  const std::map<std::string, std::string> nodes = create_nodes(b, 30);
  std::set<std::string> want_a, want_b;
  for (const auto& [id, allocation] : nodes)
    (on(kMemberA, ring_position(id, allocation)) ? want_a : want_b).insert(id);
  REQUIRE_FALSE(want_a.empty());
  REQUIRE_FALSE(want_b.empty());

  const int page_size = GENERATE(1, 3, 7, 100);
  INFO("pages of " << page_size);
  const std::vector<PowerSyncNode> a = read_all(b, kMemberA, page_size);
  const std::vector<PowerSyncNode> other = read_all(b, kMemberB, page_size);
  CHECK(ids_of(a) == want_a);
  CHECK(ids_of(other) == want_b);
  for (const std::vector<PowerSyncNode>* side : {&a, &other}) {
    for (std::size_t i = 0; i < side->size(); ++i) {
      const PowerSyncNode& n = (*side)[i];
      REQUIRE(n.ring_position.has_value());
      CHECK(*n.ring_position == ring_position(n.id, nodes.at(n.id)));
      if (i > 0) {  // (position, id) order across pages
        const PowerSyncNode& before = (*side)[i - 1];
        CHECK(std::make_pair(*before.ring_position, before.id) < std::make_pair(*n.ring_position, n.id));
      }
    }
  }
  // An allocation's members share its position, so one member reads them all.
  for (const char* allocation : {"alloc-even", "alloc-odd"}) {
    std::set<bool> sides;
    for (const auto& [id, alloc] : nodes)
      if (alloc == allocation) sides.insert(want_a.count(id) > 0);
    CHECK(sides.size() == 1);
  }
  auto none = b.nodes().power_sync_nodes({}, RingCursor{}, 10);
  REQUIRE(none);
  CHECK(none->empty());

  auto counts = b.nodes().count_nodes_on_ring(two_member_arcs());
  REQUIRE(counts);
  CHECK(counts->per_member == std::vector<int64_t>{static_cast<int64_t>(want_a.size()),
                                                   static_cast<int64_t>(want_b.size())});
  CHECK(counts->unplaced.empty());
}

TEMPLATE_TEST_CASE("conformance: a node without a ring position is every reader's until the store opens and places it",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  const std::map<std::string, std::string> nodes = create_nodes(b, 12);
  std::vector<std::string> ids, in_allocation, alone;
  for (const auto& [id, allocation] : nodes) {
    ids.push_back(id);
    (allocation.empty() ? alone : in_allocation).push_back(id);
  }
  // As a kilnd from before 025_ring_position leaves its inserts: one node
  // placed by its allocation, one by its own id.
  const std::set<std::string> unplaced = {in_allocation[0], alone[0]};
  b.raw_sql("UPDATE nodes SET ring_pos = NULL WHERE id IN ('" + in_allocation[0] + "', '" + alone[0] + "')");

  for (const std::vector<RingRange>* ranges : {&kMemberA, &kMemberB}) {
    const std::vector<PowerSyncNode> read = read_all(b, *ranges, 2);
    std::set<std::string> nulls;
    for (const PowerSyncNode& n : read)
      if (!n.ring_position) nulls.insert(n.id);
    CHECK(nulls == unplaced);  // both readers get them: the caller decides
    for (std::size_t i = 0; i < unplaced.size() && i < read.size(); ++i)
      CHECK_FALSE(read[i].ring_position.has_value());  // and first
  }
  auto counts = b.nodes().count_nodes_on_ring(two_member_arcs());
  REQUIRE(counts);
  CHECK(counts->per_member[0] + counts->per_member[1] == static_cast<int64_t>(nodes.size() - unplaced.size()));
  std::set<std::string> keys(counts->unplaced.begin(), counts->unplaced.end());
  std::set<std::string> want_keys;
  for (const std::string& id : unplaced) want_keys.insert(std::string(ownership_key(id, nodes.at(id))));
  CHECK(keys == want_keys);

  // Opening the store again places them.
  REQUIRE(b.store->migrate());
  CHECK(b.raw_sql("SELECT count(*) FROM nodes WHERE ring_pos IS NULL") == 0);
  std::set<std::string> everyone = ids_of(read_all(b, {kWholeRing}, 5));
  CHECK(everyone.size() == nodes.size());
  for (const PowerSyncNode& n : read_all(b, {kWholeRing}, 100))
    CHECK(n.ring_position == ring_position(n.id, nodes.at(n.id)));

  // An older kilnd moving a node to another allocation leaves it unplaced,
  // never at its old position; the next write through the store places it.
  const std::string moved = alone[1];
  b.raw_sql("UPDATE nodes SET allocation = 'alloc-new' WHERE id = '" + moved + "'");
  CHECK(b.raw_sql("SELECT count(*) FROM nodes WHERE ring_pos IS NULL") == 1);
  REQUIRE(b.nodes().update_node_if(moved, {}, [](Node&) { return ok_status(); }, {}));
  CHECK(b.raw_sql("SELECT count(*) FROM nodes WHERE ring_pos IS NULL") == 0);
  // A move through the store stores the new position in the same write.
  const std::string claimed = alone[2];
  REQUIRE(b.nodes().update_node_if(claimed, {}, [](Node& n) { n.allocation = "alloc-claim"; return ok_status(); }, {}));
  CHECK(b.raw_sql("SELECT count(*) FROM nodes WHERE ring_pos IS NULL") == 0);
  for (const PowerSyncNode& n : read_all(b, {kWholeRing}, 100)) {
    if (n.id == moved) CHECK(n.ring_position == ring_position(moved, "alloc-new"));
    if (n.id == claimed) CHECK(n.ring_position == ring_position(claimed, "alloc-claim"));
  }
}
