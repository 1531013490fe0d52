// The conductor ring: every node has one owner, a member joining or leaving
// moves only the nodes it takes or gives up, the spread is even, and the
// owners do not depend on the process or the order members were added in.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "controller/conductor/hash_ring.h"

using namespace kiln;

namespace {

// `n` node ids shaped like the store's (UUIDv4), from a fixed seed so the
// test is the same on every run.
std::vector<std::string> node_ids(int n, uint32_t seed = 42) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    uint64_t a = rng(), b = rng();
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x-%04x-4%03x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                  static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xfff),
                  static_cast<unsigned>(0x8000 | ((b >> 48) & 0x3fff)),
                  static_cast<unsigned long long>(b & 0xffffffffffffull));
    out.push_back(buf);
  }
  return out;
}

std::map<std::string, std::string> owners(const HashRing& ring, const std::vector<std::string>& nodes) {
  std::map<std::string, std::string> out;
  for (const std::string& n : nodes) out[n] = ring.owner(n).value();
  return out;
}

const std::vector<std::string> kConductors = {"6f1c2a4e-7b3d-4c55-9a1e-0d2f3b4c5a61",
                                              "b2e9d7c1-3a4f-4e8b-8c2d-1f0e9a8b7c62",
                                              "0a9b8c7d-6e5f-4a3b-9c2d-1e0f2a3b4c63"};

}  // namespace

TEST_CASE("ring: three conductors and 3,000 nodes: every node has one owner, each within 20% of the mean") {
  HashRing ring(kConductors);
  std::vector<std::string> nodes = node_ids(3000);
  std::map<std::string, int> count;
  for (const auto& [node, owner] : owners(ring, nodes)) {
    CHECK(std::find(kConductors.begin(), kConductors.end(), owner) != kConductors.end());
    ++count[owner];
  }
  REQUIRE(count.size() == 3);
  for (const auto& [owner, n] : count) {
    INFO(owner << " owns " << n);
    CHECK(n >= 800);   // mean 1,000 - 20%
    CHECK(n <= 1200);  // mean 1,000 + 20%
  }
  // The same with ids the test did not choose (a different seed).
  std::map<std::string, int> other;
  for (const auto& [node, owner] : owners(ring, node_ids(3000, 7))) ++other[owner];
  for (const auto& [owner, n] : other) {
    CHECK(n >= 800);
    CHECK(n <= 1200);
  }
}

TEST_CASE("ring: a conductor joining takes only nodes, about a quarter, and moves none between the others") {
  std::vector<std::string> nodes = node_ids(3000);
  auto before = owners(HashRing(kConductors), nodes);
  std::vector<std::string> four = kConductors;
  four.push_back("9d8c7b6a-5f4e-4d3c-8b2a-190817161514");
  auto after = owners(HashRing(four), nodes);
  int moved = 0;
  for (const std::string& n : nodes) {
    if (before[n] == after[n]) continue;
    ++moved;
    CHECK(after[n] == four.back());  // a node moves only to the newcomer
  }
  INFO("moved " << moved);
  CHECK(moved >= 3000 / 4 * 8 / 10);
  CHECK(moved <= 3000 / 4 * 12 / 10);
}

TEST_CASE("ring: a conductor leaving gives up only its own nodes, spread over the others") {
  std::vector<std::string> nodes = node_ids(3000);
  auto before = owners(HashRing(kConductors), nodes);
  std::vector<std::string> two = {kConductors[0], kConductors[2]};
  auto after = owners(HashRing(two), nodes);
  std::map<std::string, int> inherited;
  for (const std::string& n : nodes) {
    if (before[n] == kConductors[1]) {
      ++inherited[after[n]];
    } else {
      CHECK(after[n] == before[n]);  // the others keep theirs
    }
  }
  REQUIRE(inherited.size() == 2);  // both survivors take a share
  for (const auto& [owner, n] : inherited) CHECK(n > 200);
}

TEST_CASE("ring: owners are fixed by the members, whatever their order or the process") {
  std::vector<std::string> nodes = node_ids(500);
  std::vector<std::string> shuffled = {kConductors[2], kConductors[0], kConductors[1], kConductors[0]};
  CHECK(owners(HashRing(kConductors), nodes) == owners(HashRing(shuffled), nodes));
  // The hash is part of the protocol between instances: these values must
  // never change, or two versions of kilnd would disagree on owners.
  CHECK(HashRing::hash("") == 0xf52a15e9a9b5e89bull);
  CHECK(HashRing::hash("node#1") == 0xe8077ec07de2964aull);
  CHECK(HashRing::hash("node#1") != HashRing::hash("node#2"));
  CHECK(HashRing().owner("anything") == std::nullopt);
  CHECK(HashRing({"only"}).owner(nodes[0]) == "only");
}

TEST_CASE("ring: each member's arcs cover exactly the positions of the nodes it owns, the whole ring between them") {
  for (std::size_t members = 1; members <= 4; ++members) {
    std::vector<std::string> names(kConductors.begin(), kConductors.begin() + std::min<std::size_t>(members, 3));
    if (members == 4) names.push_back("9d8c7b6a-5f4e-4d3c-8b2a-190817161514");
    HashRing ring(names);
    INFO(members << " members");
    const std::vector<RingArc> arcs = ring.arcs();
    REQUIRE_FALSE(arcs.empty());
    // Sorted, disjoint, no gap: from the lowest position to the highest.
    CHECK(arcs.front().range.first == INT64_MIN);
    CHECK(arcs.back().range.last == INT64_MAX);
    for (std::size_t i = 0; i < arcs.size(); ++i) {
      CHECK(arcs[i].range.first <= arcs[i].range.last);
      CHECK(arcs[i].member < ring.members().size());
      if (i > 0) {
        CHECK(arcs[i].range.first == arcs[i - 1].range.last + 1);
        // Adjacent arcs of one member are merged, but the two ends, both the
        // first point's member's, stay apart (they meet only across the wrap).
        if (i + 1 < arcs.size()) CHECK(arcs[i].member != arcs[i - 1].member);
      }
    }
    if (members == 1) CHECK(arcs.size() == 1);
    // Every node's position lies in an arc of its owner, and in ranges_of its
    // owner only.
    for (const std::string& node : node_ids(2000)) {
      const int64_t p = ring_position(node, "");
      const std::string owner = ring.owner(node).value();
      auto arc = std::find_if(arcs.begin(), arcs.end(),
                              [&](const RingArc& a) { return a.range.first <= p && p <= a.range.last; });
      REQUIRE(arc != arcs.end());
      CHECK(ring.members()[arc->member] == owner);
      for (const std::string& m : ring.members()) {
        const std::vector<RingRange> ranges = ring.ranges_of(m);
        const bool in = std::any_of(ranges.begin(), ranges.end(),
                                    [&](const RingRange& r) { return r.first <= p && p <= r.last; });
        CHECK(in == (m == owner));
      }
    }
  }
  CHECK(HashRing().arcs().empty());
  CHECK(HashRing(kConductors).ranges_of("not-a-member").empty());
  // A stored position keeps the hash's order, and a node in an allocation
  // sits where the allocation does.
  CHECK(ring_position_of_hash(0) == INT64_MIN);
  CHECK(ring_position_of_hash(UINT64_MAX) == INT64_MAX);
  CHECK(ring_position_of_hash(0x7fffffffffffffffull) == -1);
  CHECK(ring_position("node", "alloc") == ring_position("other", "alloc"));
  CHECK(ring_position("node", "") == ring_position_of_hash(HashRing::hash("node")));
}
