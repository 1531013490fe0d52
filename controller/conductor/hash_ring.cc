#include "controller/conductor/hash_ring.h"

#include <algorithm>
#include <cassert>

namespace kiln {

uint64_t HashRing::hash(std::string_view text) { return ring_hash(text); }

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

std::vector<RingArc> HashRing::arcs() const {
  std::vector<RingArc> out;
  if (points_.empty()) return out;
  // Point i owns the hashes after point i-1 up to itself; the first point
  // also owns those after the last point (the wrap-around). Of equal
  // points the first (the smaller member) owns the value: owner() finds it
  // by lower_bound, so the others own an empty range.
  auto add = [&](uint64_t first, uint64_t last, std::size_t member) {
    const RingRange r{ring_position_of_hash(first), ring_position_of_hash(last)};
    if (!out.empty() && out.back().member == member && out.back().range.last != INT64_MAX &&
        out.back().range.last + 1 == r.first) {
      out.back().range.last = r.last;  // the same member's next arc: one range
    } else {
      out.push_back({r, member});
    }
  };
  add(0, points_.front().first, points_.front().second);
  for (std::size_t i = 1; i < points_.size(); ++i)
    if (points_[i].first != points_[i - 1].first) add(points_[i - 1].first + 1, points_[i].first, points_[i].second);
  if (points_.back().first != UINT64_MAX) add(points_.back().first + 1, UINT64_MAX, points_.front().second);
  return out;
}

std::vector<RingRange> HashRing::ranges_of(std::string_view member) const {
  std::vector<RingRange> out;
  const auto m = std::lower_bound(members_.begin(), members_.end(), member);
  if (m == members_.end() || *m != member) return out;
  const std::size_t index = static_cast<std::size_t>(m - members_.begin());
  for (const RingArc& a : arcs())
    if (a.member == index) out.push_back(a.range);
  return out;
}

}  // namespace kiln
