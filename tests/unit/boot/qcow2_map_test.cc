// controller/boot/qcow2_map.h: qemu-img map's JSON read as untrusted (it
// describes a hostile file), taken a window at a time, and the sparse stream
// planned from the runs: block size, edge blocks, chunk limits.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "controller/boot/qcow2_map.h"

namespace {

using kiln::boot::MapRun;
using kiln::boot::parse_qemu_map;
using kiln::boot::plan_sparse;

constexpr int64_t kMiB = 1 << 20;

// What qemu-img 7.2 printed for bench/qcow2-convert's plain image, first runs.
const char* kRealMap = R"([{ "start": 0, "length": 1048576, "depth": 0, "present": false, "zero": true, "data": false},
{ "start": 1048576, "length": 255918080, "depth": 0, "present": true, "zero": false, "data": true, "offset": 327680},
{ "start": 256966656, "length": 65536, "depth": 0, "present": false, "zero": true, "data": false},
{ "start": 257032192, "length": 3538944, "depth": 0, "present": true, "zero": false, "data": true, "offset": 256245760}])";

std::string run_json(int64_t start, int64_t length, bool data, bool zero, const char* extra = "") {
  return R"({"start": )" + std::to_string(start) + R"(, "length": )" + std::to_string(length) +
         R"(, "depth": 0, "present": true, "zero": )" + (zero ? "true" : "false") + R"(, "data": )" +
         (data ? "true" : "false") + extra + "}";
}

}  // namespace

TEST_CASE("qemu-img map - a real map parses into zero and plain runs with their file offsets", "[qcow2_map]") {
  std::vector<MapRun> runs;
  const int64_t len = 257032192 + 3538944;
  REQUIRE(parse_qemu_map(kRealMap, 0, len, 600 * kMiB, runs).ok());
  REQUIRE(runs.size() == 4);
  CHECK(runs[0].kind == MapRun::Kind::kZero);
  CHECK(runs[1].kind == MapRun::Kind::kPlain);
  CHECK(runs[1].offset == 327680);
  CHECK(runs[1].length == 255918080);
  CHECK(runs[3].offset == 256245760);
}

TEST_CASE("qemu-img map - windows append, and neighbours of one kind merge", "[qcow2_map]") {
  std::vector<MapRun> runs;
  // Window 1: zeros then plain data at file offset 4096. Window 2 continues
  // the same data contiguously in the file, then compressed, then
  // compressed again (merged), then data present but zero (a zero run).
  REQUIRE(parse_qemu_map("[" + run_json(0, 4096, false, true) + "," + run_json(4096, 4096, true, false, R"(, "offset": 4096)") + "]",
                         0, 8192, kMiB, runs)
              .ok());
  REQUIRE(parse_qemu_map("[" + run_json(8192, 4096, true, false, R"(, "offset": 8192)") + "," + run_json(12288, 4096, true, false) +
                             "," + run_json(16384, 4096, true, false) + "," + run_json(20480, 4096, true, true, R"(, "offset": 0)") + "]",
                         8192, 16384, kMiB, runs)
              .ok());
  REQUIRE(runs.size() == 4);
  CHECK(runs[1].kind == MapRun::Kind::kPlain);
  CHECK(runs[1].length == 8192);  // the two windows' plain runs, contiguous in the file
  CHECK(runs[2].kind == MapRun::Kind::kCompressed);
  CHECK(runs[2].length == 8192);
  CHECK(runs[3].kind == MapRun::Kind::kZero);
}

TEST_CASE("qemu-img map - each malformed or hostile map is refused naming why", "[qcow2_map]") {
  struct Case {
    const char* name;
    std::string json;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"not JSON", "not json", "no JSON array"},
      {"an object, not an array", "{}", "no JSON array"},
      {"a run that is not an object", "[1]", "not an object"},
      {"a run without depth", R"([{"start": 0, "length": 8192, "zero": true, "data": false}])", "without start"},
      {"a negative length", R"([{"start": 0, "length": -1, "depth": 0, "zero": true, "data": false}])", "without start"},
      {"a gap", "[" + run_json(4096, 4096, false, true) + "]", "expected 0"},
      {"an overlap", "[" + run_json(0, 8192, false, true) + "," + run_json(4096, 4096, false, true) + "]", "expected 8192"},
      {"a run past the window", "[" + run_json(0, 16384, false, true) + "]", "past the end"},
      {"too short", "[" + run_json(0, 4096, false, true) + "]", "covered bytes 0 to 4096"},
      {"a backing file's run", R"([{"start": 0, "length": 8192, "depth": 1, "zero": true, "data": false}])", "backing file"},
      {"data outside the file", "[" + run_json(0, 8192, true, false, R"(, "offset": 1044480)") + "]", "outside the file"},
      {"an offset that is not a number", "[" + run_json(0, 8192, true, false, R"(, "offset": "0")") + "]", "malformed offset"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    std::vector<MapRun> runs;
    auto s = parse_qemu_map(c.json, 0, 8192, kMiB, runs);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().code == kiln::Code::kUnprocessable);
    CHECK(s.error().message.find(c.why) != std::string::npos);
    CHECK(s.error().message.rfind("qcow2 image refused: qemu-img map", 0) == 0);
  }
}

TEST_CASE("qemu-img map - more runs than the bound is refused, across windows too", "[qcow2_map]") {
  // kMaxMapRuns runs already taken from earlier windows.
  std::vector<MapRun> runs(kiln::boot::kMaxMapRuns);
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i] = MapRun{static_cast<int64_t>(i) * 512, 512, i % 2 ? MapRun::Kind::kZero : MapRun::Kind::kCompressed, 0};
  }
  // The last is a zero run (an odd index): a plain run cannot merge with it,
  // and is one too many.
  const int64_t at = runs.back().start + runs.back().length;
  auto s = parse_qemu_map("[" + run_json(at, 512, true, false, R"(, "offset": 0)") + "]", at, 512, kMiB, runs);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message.find("more than") != std::string::npos);
}

TEST_CASE("sparse plan - zeros between data become fills, edge blocks go with the data", "[qcow2_map]") {
  // 64 KiB disk: data [1024, 5120) (touches blocks 0 and 1), zeros, data in
  // the last 512 bytes (block 15).
  const std::vector<MapRun> r2 = {{0, 1024, MapRun::Kind::kZero, 0},
                                  {1024, 4096, MapRun::Kind::kPlain, 0},
                                  {5120, 65536 - 512 - 5120, MapRun::Kind::kZero, 0},
                                  {65536 - 512, 512, MapRun::Kind::kCompressed, 0}};
  auto p = plan_sparse(r2, 65536);
  REQUIRE(p.ok());
  CHECK(p->block_size == 4096);
  CHECK(p->total_blocks == 16);
  REQUIRE(p->chunks.size() == 3);
  CHECK((p->chunks[0].data && p->chunks[0].first == 0 && p->chunks[0].blocks == 2));
  CHECK((!p->chunks[1].data && p->chunks[1].first == 2 && p->chunks[1].blocks == 13));
  CHECK((p->chunks[2].data && p->chunks[2].first == 15 && p->chunks[2].blocks == 1));
}

TEST_CASE("sparse plan - block size follows the disk size, raw chunks stay under their cap", "[qcow2_map]") {
  SECTION("not a multiple of 4096: 512-byte blocks") {
    auto p = plan_sparse({{0, 8704, MapRun::Kind::kZero, 0}}, 8704);
    REQUIRE(p.ok());
    CHECK(p->block_size == 512);
    CHECK(p->total_blocks == 17);
    REQUIRE(p->chunks.size() == 1);
    CHECK_FALSE(p->chunks[0].data);
  }
  SECTION("16 TiB: 8192-byte blocks, as 4096 would need 2^32 of them") {
    const int64_t size = int64_t{16} << 40;
    auto p = plan_sparse({{0, size, MapRun::Kind::kZero, 0}}, size);
    REQUIRE(p.ok());
    CHECK(p->block_size == 8192);
    CHECK(p->total_blocks == uint32_t{1} << 31);
    // One fill chunk cannot count 2^31 blocks past its 32-bit field: it fits.
    CHECK(p->chunks.size() == 1);
  }
  SECTION("an odd multiple of 512 above 2 TiB has no block size") {
    const int64_t size = (int64_t{3} << 40) + 512;
    auto p = plan_sparse({{0, size, MapRun::Kind::kZero, 0}}, size);
    REQUIRE_FALSE(p.ok());
    CHECK(p.error().code == kiln::Code::kUnprocessable);
  }
  SECTION("200 MiB of data: 64 MiB raw chunks") {
    auto p = plan_sparse({{0, 200 * kMiB, MapRun::Kind::kPlain, 0}}, 200 * kMiB);
    REQUIRE(p.ok());
    REQUIRE(p->chunks.size() == 4);
    for (int i = 0; i < 3; ++i) CHECK(int64_t{p->chunks[i].blocks} * 4096 == 64 * kMiB);
    CHECK(int64_t{p->chunks[3].blocks} * 4096 == 8 * kMiB);
  }
}
