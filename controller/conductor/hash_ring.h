#pragma once
// HashRing: which conductor owns which node, as a consistent hash ring.
//
// Every member (a conductor id) is placed on a 64-bit circle at
// `virtual_points` positions, the hashes of "<id>#0", "<id>#1", ...; a node
// belongs to the member whose point comes first clockwise from the hash of
// the node's id. Many points per member even out the arcs (with 256 points
// each, three members each get a third of the nodes within a few percent),
// and a member joining or leaving moves only the nodes on the arcs it takes
// or gives up: about 1/N of them, never a node between two members that stay.
//
// The hash is ring_hash (controller/model/ring_position.h): FNV-1a 64
// finished with a 64-bit mixer (splitmix64's), independent of the platform,
// the process and the order members were added in, so every kilnd with the
// same live members computes the same owner for every node without talking
// to the others. The store keeps each node's hash (its ring position), and
// arcs() says which positions each member owns, so an instance can read
// only its own nodes.
//
// A pure value: no I/O, no clock. Thread-safe for concurrent const use.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "controller/model/ring_position.h"

namespace kiln {

class HashRing {
 public:
  // Enough points that three to a few dozen members split the nodes within
  // a few percent of even; lookups stay a binary search over members x 256.
  static constexpr int kDefaultVirtualPoints = 256;

  // A ring over `members` (duplicates count once; empty: no owner for any
  // node). virtual_points must be > 0.
  explicit HashRing(std::vector<std::string> members = {}, int virtual_points = kDefaultVirtualPoints);

  // The member owning `node_id`; nullopt when the ring is empty.
  std::optional<std::string> owner(std::string_view node_id) const;
  // The members, sorted.
  const std::vector<std::string>& members() const { return members_; }
  bool empty() const { return members_.empty(); }

  // Which stored positions each member owns: sorted, disjoint, together the
  // whole ring (empty when the ring is), adjacent arcs of one member merged.
  // RingArc::member indexes members().
  std::vector<RingArc> arcs() const;
  // The positions `member` owns, sorted (empty when it is not a member).
  std::vector<RingRange> ranges_of(std::string_view member) const;

  // The ring's hash, ring_hash (exposed for tests: it must never change
  // between versions, or instances of two versions would disagree on owners).
  static uint64_t hash(std::string_view text);

 private:
  std::vector<std::string> members_;
  // (point, index into members_), sorted by point.
  std::vector<std::pair<uint64_t, std::size_t>> points_;
};

}  // namespace kiln
