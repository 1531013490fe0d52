#pragma once
// Where a node sits on the conductor ring (controller/conductor/hash_ring.h),
// as a value the store keeps with the node, so that an instance can read
// only the nodes on its own arcs instead of every node.
//
// A node is placed by its ownership key: its allocation's id while it has
// one (every member of an allocation has the allocation's owner), otherwise
// its own id. The key is hashed by ring_hash (FNV-1a 64 and a mixer); that
// hash is part of the protocol between instances and between a database and
// the kilnd versions that read it: it must never change.
//
// SQL has no unsigned 64-bit integer, so the store keeps ring_position(), the
// hash with its top bit flipped, read as a signed integer: the same order as
// the hash (a range of hashes is a range of positions) in a BIGINT/INTEGER
// column both engines index.
//
// Pure values: no I/O; thread-safe.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln {

inline std::string_view ownership_key(std::string_view node_id, std::string_view allocation) {
  return allocation.empty() ? node_id : allocation;
}

// The ring's hash of `text` (FNV-1a 64, then splitmix64's finaliser).
uint64_t ring_hash(std::string_view text);

// A hash as the store keeps it: order-preserving into int64.
constexpr int64_t ring_position_of_hash(uint64_t h) {
  return static_cast<int64_t>(h ^ 0x8000000000000000ull);
}

// The stored position of a node with this id and allocation.
inline int64_t ring_position(std::string_view node_id, std::string_view allocation) {
  return ring_position_of_hash(ring_hash(ownership_key(node_id, allocation)));
}

// Positions first..last, both included (first <= last).
struct RingRange {
  int64_t first = 0;
  int64_t last = 0;
  bool operator==(const RingRange&) const = default;
};

// Positions owned by one member of a ring (HashRing::arcs): `member`
// indexes the ring's sorted members.
struct RingArc {
  RingRange range;
  std::size_t member = 0;
};

// Every position: what an instance alone reads.
constexpr RingRange kWholeRing{INT64_MIN, INT64_MAX};

}  // namespace kiln
