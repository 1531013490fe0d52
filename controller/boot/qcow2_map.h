#pragma once
// The layout of a qcow2's virtual disk, as `qemu-img map --output=json` reads
// it, and the sparse stream (common/sparse_image.h) planned from it.
//
// The map says, for each run of the disk, whether it reads as zeros, as
// plain data stored at a known offset of the qcow2 file (an uncompressed
// cluster run: copied straight from the file, no qemu-img pass), or as data
// with no offset (compressed clusters: qemu-img must decode them). qemu
// produced the JSON, but from a hostile file: it is parsed with bounds, and
// every run must tile the disk exactly and every offset lie inside the file.
//
// Pure functions; no I/O; any input is safe (the fuzzer passes bytes).

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace kiln::boot {

struct MapRun {
  enum class Kind { kZero, kPlain, kCompressed };
  int64_t start = 0;   // byte offset in the virtual disk
  int64_t length = 0;  // > 0
  Kind kind = Kind::kZero;
  int64_t offset = 0;  // kPlain: where the run's bytes start in the qcow2 file
};

// More runs than this and the image is refused: a cloud image has hundreds
// to a few thousand; a crafted one alternating clusters could have millions,
// and each costs parsed JSON in kilnd's memory (~120 bytes of text a run).
inline constexpr size_t kMaxMapRuns = size_t{1} << 16;
inline constexpr size_t kMaxMapJson = size_t{16} << 20;

// Parses the JSON of `qemu-img map --start-offset=start --max-length=length`
// on a qcow2 file of `file_size` bytes and appends its runs to `runs` (which
// holds the runs before `start`, if any: maps are taken a window at a time to
// bound their size). Adjacent runs of the same kind are merged (plain runs
// only when their file offsets are contiguous too). Errors (kUnprocessable,
// "qcow2 image refused: qemu-img map ..."): not a JSON array of run objects,
// a run not starting where the previous ended, runs not covering exactly
// [start, start + length), depth other than 0 (a backing file), a plain
// run's bytes outside the file, more than kMaxMapRuns runs in all.
Status parse_qemu_map(std::string_view json, int64_t start, int64_t length, int64_t file_size,
                      std::vector<MapRun>& runs);

// One chunk of the sparse stream: `blocks` blocks from block `first`, either
// data (RAW) or zeros (FILL with 0).
struct SparseChunk {
  int64_t first = 0;
  uint32_t blocks = 0;
  bool data = false;
};

struct SparsePlan {
  uint32_t block_size = 0;
  uint32_t total_blocks = 0;
  std::vector<SparseChunk> chunks;  // in disk order, covering every block once
};

// Largest RAW chunk (its byte count must fit the format's 32-bit total_sz).
inline constexpr int64_t kMaxRawChunkBytes = int64_t{64} << 20;

// Plans the stream for `runs` (parse_qemu_map's tiling of a disk of
// `virtual_size` bytes): the block size is 4096 (or 512 when the size is not
// a multiple of 4096), doubled while the disk has 2^32 blocks or more; a
// block is data when any byte of it lies in a non-zero run. Errors:
// kUnprocessable when no block size fits the format (a size that is an odd
// multiple of 512 above 2 TiB).
Result<SparsePlan> plan_sparse(const std::vector<MapRun>& runs, int64_t virtual_size);

}  // namespace kiln::boot
