#include "controller/conductor/hash_ring.h"

#include <algorithm>
#include <cassert>

namespace kiln {

uint64_t HashRing::hash(std::string_view text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;  // FNV prime
  }
  // FNV alone leaves strings that differ in their last characters ("id#1",
  // "id#2") close together on the circle; the mixer spreads them out.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

HashRing::HashRing(std::vector<std::string> members, int virtual_points) : members_(std::move(members)) {
  assert(virtual_points > 0);
  std::sort(members_.begin(), members_.end());
  members_.erase(std::unique(members_.begin(), members_.end()), members_.end());
  points_.reserve(members_.size() * static_cast<std::size_t>(virtual_points));
  for (std::size_t m = 0; m < members_.size(); ++m)
    for (int i = 0; i < virtual_points; ++i)
      points_.emplace_back(hash(members_[m] + "#" + std::to_string(i)), m);
  // Ties (two members' points on one value) go to the smaller member id, so
  // the owner does not depend on the order members were given in.
  std::sort(points_.begin(), points_.end());
}

std::optional<std::string> HashRing::owner(std::string_view node_id) const {
  if (points_.empty()) return std::nullopt;
  const uint64_t h = hash(node_id);
  auto it = std::lower_bound(points_.begin(), points_.end(), h,
                             [](const std::pair<uint64_t, std::size_t>& p, uint64_t v) { return p.first < v; });
  if (it == points_.end()) it = points_.begin();  // past the last point: wrap around
  return members_[it->second];
}

}  // namespace kiln
