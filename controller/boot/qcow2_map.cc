#include "controller/boot/qcow2_map.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "common/json_text.h"

namespace kiln::boot {

namespace {

Error map_refused(const std::string& why) { return Error(Code::kUnprocessable, "qcow2 image refused: qemu-img map " + why); }

// A non-negative integer member, or nothing.
std::optional<int64_t> int_member(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number_unsigned()) return std::nullopt;
  const uint64_t v = it->get<uint64_t>();
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<bool> bool_member(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  if (it == o.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

bool mergeable(const MapRun& a, const MapRun& b) {
  if (a.kind != b.kind) return false;
  return a.kind != MapRun::Kind::kPlain || a.offset + a.length == b.offset;
}

}  // namespace

Status parse_qemu_map(std::string_view json, int64_t window_start, int64_t window_length, int64_t file_size,
                      std::vector<MapRun>& runs) {
  if (window_start < 0 || window_length <= 0) return Error(Code::kInvalidArgument, "map window out of range");
  if (json.size() > kMaxMapJson) return map_refused("said too much");
  auto parsed = parse_json(json, JsonLimits{.max_depth = 4});
  if (!parsed || !parsed->is_array()) return map_refused("gave no JSON array");
  const auto too_many = [] { return map_refused("found more than " + std::to_string(kMaxMapRuns) + " runs"); };
  if (parsed->size() > kMaxMapRuns) return too_many();
  const int64_t window_end = window_start + window_length;
  int64_t end = window_start;
  for (const auto& o : *parsed) {
    if (!o.is_object()) return map_refused("gave a run that is not an object");
    const auto start = int_member(o, "start");
    const auto length = int_member(o, "length");
    const auto depth = int_member(o, "depth");
    const auto zero = bool_member(o, "zero");
    const auto data = bool_member(o, "data");
    if (!start || !length || !depth || !zero || !data) return map_refused("gave a run without start, length, depth, zero and data");
    if (*start != end) return map_refused("gave a run at " + std::to_string(*start) + ", expected " + std::to_string(end));
    if (*length == 0 || *length > window_end - end) return map_refused("gave a run past the end of its window");
    if (*depth != 0) return map_refused("gave a run from a backing file");
    MapRun run{*start, *length, MapRun::Kind::kZero, 0};
    if (*data && !*zero) {
      const auto offset = int_member(o, "offset");
      if (o.contains("offset") && !offset) return map_refused("gave a malformed offset");
      if (offset) {
        if (*offset > file_size || *length > file_size - *offset) return map_refused("gave data outside the file");
        run.kind = MapRun::Kind::kPlain;
        run.offset = *offset;
      } else {
        run.kind = MapRun::Kind::kCompressed;
      }
    }
    end += *length;
    if (!runs.empty() && runs.back().start + runs.back().length == run.start && mergeable(runs.back(), run)) {
      runs.back().length += run.length;
    } else {
      if (runs.size() >= kMaxMapRuns) return too_many();
      runs.push_back(run);
    }
  }
  if (end != window_end) {
    return map_refused("covered bytes " + std::to_string(window_start) + " to " + std::to_string(end) + " of a window to " +
                  std::to_string(window_end));
  }
  return ok_status();
}

Result<SparsePlan> plan_sparse(const std::vector<MapRun>& runs, int64_t virtual_size) {
  int64_t block = virtual_size % 4096 == 0 ? 4096 : 512;
  constexpr int64_t kMaxBlocks = int64_t{1} << 32;
  while (virtual_size / block >= kMaxBlocks && virtual_size % (block * 2) == 0) block *= 2;
  if (virtual_size % block != 0 || virtual_size / block >= kMaxBlocks) {
    return Error(Code::kUnprocessable, "qcow2 image refused: a virtual size of " + std::to_string(virtual_size) +
                                           " bytes has no block size the sparse format can carry");
  }
  SparsePlan plan;
  plan.block_size = static_cast<uint32_t>(block);
  plan.total_blocks = static_cast<uint32_t>(virtual_size / block);
  const int64_t max_raw_blocks = kMaxRawChunkBytes / block;
  // Adds blocks [first, first + n) of one kind, merging with the last chunk
  // and cutting data chunks at max_raw_blocks and fills at the 32-bit count.
  const auto add = [&](int64_t first, int64_t n, bool data) {
    const int64_t cap = data ? max_raw_blocks : int64_t{std::numeric_limits<uint32_t>::max()};
    while (n > 0) {
      if (!plan.chunks.empty()) {
        SparseChunk& last = plan.chunks.back();
        if (last.data == data && last.first + last.blocks == first && last.blocks < cap) {
          const int64_t k = std::min(n, cap - last.blocks);
          last.blocks += static_cast<uint32_t>(k);
          first += k, n -= k;
          continue;
        }
      }
      const int64_t k = std::min(n, cap);
      plan.chunks.push_back({first, static_cast<uint32_t>(k), data});
      first += k, n -= k;
    }
  };
  // Block b is data when any non-zero run touches it; the blocks between
  // data are zeros. Runs come in disk order, so data intervals do too.
  int64_t next = 0;  // first block not yet planned
  for (const auto& run : runs) {
    if (run.kind == MapRun::Kind::kZero) continue;
    const int64_t lo = std::max(next, run.start / block);
    const int64_t hi = (run.start + run.length + block - 1) / block;
    if (lo >= hi) continue;
    if (next < lo) add(next, lo - next, false);
    add(lo, hi - lo, true);
    next = hi;
  }
  if (next < plan.total_blocks) add(next, plan.total_blocks - next, false);
  return plan;
}

}  // namespace kiln::boot
