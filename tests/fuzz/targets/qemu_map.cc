// qemu-img map's JSON as kilnd reads it (controller/boot/qcow2_map.h
// parse_qemu_map), then the sparse stream planned from it (plan_sparse): the
// map describes a tenant's hostile qcow2. The first 8 bytes pick the window
// length and the file size, the rest is the JSON.
//
// Oracles: accepted runs tile the window exactly, in order, no two
// neighbours mergeable, every plain run inside the file; the plan then covers
// every block once, in order, data chunks within their cap, and every block
// touched by data is a data block.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "controller/boot/qcow2_map.h"

using kiln::boot::MapRun;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  // A window of 512 B .. 16 MiB, in 512-byte steps; a file of up to 16 MiB.
  const int64_t window = (int64_t{data[0]} << 8 | data[1]) % 32768 * 512 + 512;
  const int64_t file_size = (int64_t{data[2]} << 16 | int64_t{data[3]} << 8 | data[4]) * 1;
  const std::string_view json(reinterpret_cast<const char*>(data + 8), size - 8);

  std::vector<MapRun> runs;
  auto s = kiln::boot::parse_qemu_map(json, 0, window, file_size, runs);
  if (!s) {
    if (s.error().code != kiln::Code::kUnprocessable || s.error().message.empty()) std::abort();
    return 0;
  }
  int64_t end = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const MapRun& r = runs[i];
    if (r.start != end || r.length <= 0) std::abort();
    end += r.length;
    if (r.kind == MapRun::Kind::kPlain && (r.offset < 0 || r.offset + r.length > file_size)) std::abort();
    if (i > 0 && runs[i - 1].kind == r.kind &&
        (r.kind != MapRun::Kind::kPlain || runs[i - 1].offset + runs[i - 1].length == r.offset)) {
      std::abort();  // should have been merged
    }
  }
  if (end != window) std::abort();

  auto plan = kiln::boot::plan_sparse(runs, window);
  if (!plan) return 0;
  const int64_t block = plan->block_size;
  int64_t next = 0;
  for (const auto& c : plan->chunks) {
    if (c.first != next || c.blocks == 0) std::abort();
    if (c.data && int64_t{c.blocks} * block > kiln::boot::kMaxRawChunkBytes) std::abort();
    next += c.blocks;
  }
  if (next != plan->total_blocks || int64_t{plan->total_blocks} * block != window) std::abort();
  for (const auto& r : runs) {
    if (r.kind == MapRun::Kind::kZero) continue;
    for (int64_t b = r.start / block; b < (r.start + r.length + block - 1) / block; ++b) {
      bool data_block = false;
      for (const auto& c : plan->chunks)
        if (c.data && b >= c.first && b < c.first + c.blocks) data_block = true;
      if (!data_block) std::abort();
    }
  }
  return 0;
}
