// The agent's raw+sparse decoder (agent/deploy/stream_decoder.h): streams
// built with common/sparse_image.h and by Android's own `img2simg` decode to
// the disk they describe however the network cuts them; every malformed
// stream is refused with a reason, before the bytes of a bad chunk are passed on.

#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/deploy/stream_decoder.h"
#include "common/child_process.h"
#include "common/sparse_image.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/skip.h"

namespace {

using kiln::sparse::ChunkType;

std::string bytes(const auto& arr) { return std::string(reinterpret_cast<const char*>(arr.data()), arr.size()); }

std::string file_header(uint32_t block, uint32_t blocks, uint32_t chunks) {
  return bytes(kiln::sparse::encode_file_header({block, blocks, chunks}));
}

std::string chunk(ChunkType t, uint32_t blocks, uint32_t total) {
  return bytes(kiln::sparse::encode_chunk_header(t, blocks, total));
}

// Decodes `in` fed `step` bytes at a time. `fed` is false when feed refused,
// and the error is kept in `why`.
struct Decoded {
  bool fed = true;
  bool finished = false;
  std::string out;
  std::string why;
};

Decoded decode(const std::string& in, size_t step = 1 << 20) {
  Decoded d;
  auto dec = kiln::agent::StreamDecoder::create("raw+sparse");
  REQUIRE(dec.ok());
  const kiln::agent::ByteSink sink = [&](const char* p, size_t n) {
    d.out.append(p, n);
    return kiln::ok_status();
  };
  for (size_t at = 0; at < in.size(); at += step) {
    auto s = (*dec)->feed(in.data() + at, std::min(step, in.size() - at), sink);
    if (!s) {
      d.fed = false;
      d.why = s.error().message;
      return d;
    }
  }
  auto f = (*dec)->finish();
  d.finished = f.ok();
  if (!f) d.why = f.error().message;
  return d;
}

// A 5-block (block 8) stream: raw "ABCDEFGH", fill 0x01020304 x2 blocks,
// don't-care 1 block, raw "12345678".
std::string sample() {
  return file_header(8, 5, 4) + chunk(ChunkType::kRaw, 1, 12 + 8) + "ABCDEFGH" + chunk(ChunkType::kFill, 2, 16) +
         std::string("\x01\x02\x03\x04", 4) + chunk(ChunkType::kDontCare, 1, 12) + chunk(ChunkType::kRaw, 1, 20) +
         "12345678";
}

std::string sample_disk() {
  return "ABCDEFGH" + std::string("\x01\x02\x03\x04\x01\x02\x03\x04\x01\x02\x03\x04\x01\x02\x03\x04", 16) +
         std::string(8, '\0') + "12345678";
}

}  // namespace

TEST_CASE("sparse decoder - raw, fill and don't-care chunks give the disk, however the input is cut",
          "[stream_decoder][sparse]") {
  const std::string in = sample();
  for (size_t step : {size_t{1}, size_t{3}, size_t{13}, in.size()}) {
    INFO("step " << step);
    const Decoded d = decode(in, step);
    REQUIRE(d.fed);
    CHECK(d.finished);
    CHECK(d.out == sample_disk());
  }
}

TEST_CASE("sparse decoder - larger headers than version 1.0's are skipped, as the format allows",
          "[stream_decoder][sparse]") {
  // file_hdr_sz 32 and chunk_hdr_sz 16: four bytes of padding after each.
  std::string fh = file_header(8, 1, 1);
  fh[8] = 32;
  fh[10] = 16;
  const std::string in = fh + "PPPP" + chunk(ChunkType::kRaw, 1, 16 + 8) + "pppp" + "ABCDEFGH";
  const Decoded d = decode(in, 5);
  REQUIRE(d.fed);
  CHECK(d.finished);
  CHECK(d.out == "ABCDEFGH");
}

TEST_CASE("sparse decoder - each malformed stream is refused with its reason", "[stream_decoder][sparse]") {
  struct Case {
    const char* name;
    std::string in;
    const char* why;
  };
  std::string bad_magic = sample();
  bad_magic[0] ^= 1;
  std::string v2 = sample();
  v2[4] = 2;
  std::string small_hdr = sample();
  small_hdr[8] = 20;
  const std::vector<Case> cases = {
      {"bad magic", bad_magic, "bad magic"},
      {"major version 2", v2, "major version"},
      {"a file header shorter than 28 bytes", small_hdr, "file header size"},
      {"block size 0", file_header(0, 1, 1), "block size"},
      {"block size not a multiple of 4", file_header(6, 1, 1), "block size"},
      {"block size above 1 MiB", file_header(2 << 20, 1, 1), "block size"},
      {"a raw chunk whose size is not its blocks'", file_header(8, 1, 1) + chunk(ChunkType::kRaw, 1, 12 + 9) + "ABCDEFGHI",
       "raw chunk size"},
      {"a fill chunk of other than 4 bytes", file_header(8, 1, 1) + chunk(ChunkType::kFill, 1, 12 + 8) + "ABCDEFGH",
       "fill chunk"},
      {"a don't-care chunk with data", file_header(8, 1, 1) + chunk(ChunkType::kDontCare, 1, 16) + "ABCD", "don't-care"},
      {"a crc32 chunk", file_header(8, 1, 2) + chunk(ChunkType::kCrc32, 0, 16) + "ABCD", "crc32"},
      {"an unknown chunk type", file_header(8, 1, 1) + bytes(kiln::sparse::encode_chunk_header(ChunkType(0xCAC9), 1, 12)),
       "unknown chunk type"},
      {"chunks covering more blocks than the header", file_header(8, 1, 1) + chunk(ChunkType::kRaw, 2, 12 + 16) +
                                                          std::string(16, 'x'),
       "more than total_blks"},
      {"data after the last chunk", sample() + "X", "after the last chunk"},
      {"a huge fill past the header's blocks", file_header(8, 4, 1) + chunk(ChunkType::kFill, 0xFFFFFFFF, 16) + "\0\0\0\0",
       "more than total_blks"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const Decoded d = decode(c.in, 7);
    CHECK_FALSE(d.fed);
    CHECK(d.why.find(c.why) != std::string::npos);
    CHECK(d.why.rfind("sparse image: ", 0) == 0);
  }
}

TEST_CASE("sparse decoder - a stream that stops early, or covers fewer blocks than it said, fails at the end",
          "[stream_decoder][sparse]") {
  const std::string in = sample();
  for (size_t cut : {size_t{0}, size_t{10}, size_t{28}, size_t{35}, in.size() - 1}) {
    INFO("cut at " << cut);
    const Decoded d = decode(in.substr(0, cut), 4);
    REQUIRE(d.fed);
    CHECK_FALSE(d.finished);
  }
  // One chunk of 1 block where the header says 2 blocks.
  const Decoded d = decode(file_header(8, 2, 1) + chunk(ChunkType::kRaw, 1, 20) + "ABCDEFGH");
  REQUIRE(d.fed);
  CHECK_FALSE(d.finished);
  CHECK(d.why.find("cover 1 of 2 blocks") != std::string::npos);
}

TEST_CASE("sparse decoder - a file made by Android's img2simg decodes to that file", "[stream_decoder][sparse]") {
  if (::access("/usr/bin/img2simg", X_OK) != 0) {
    KILN_SKIP("img2simg (Debian android-sdk-libsparse-utils) is needed for an independently written stream");
  }
  kiln::testing::ScratchDir dir;
  // 1 MiB with data, a run of zeros, a repeated pattern (a fill chunk), data.
  std::string disk(1 << 20, '\0');
  for (size_t i = 0; i < 100000; ++i) disk[i] = static_cast<char>((i * 2654435761u) >> 24);
  for (size_t i = 600000; i < 700000; ++i) disk[i] = "\xde\xad\xbe\xef"[i % 4];
  for (size_t i = 900000; i < disk.size(); ++i) disk[i] = static_cast<char>(i);
  const std::string raw = dir.write("disk.raw", disk);
  const std::string simg = dir.path() + "/disk.simg";
  auto r = kiln::run_program({"/usr/bin/img2simg", raw, simg}, std::chrono::seconds(30));
  REQUIRE(r.ok());
  INFO(r->err);
  REQUIRE(r->status == 0);
  std::string in(std::filesystem::file_size(simg), '\0');
  std::ifstream(simg, std::ios::binary).read(in.data(), static_cast<std::streamsize>(in.size()));
  CHECK(in.size() < disk.size());  // it did write a sparse stream
  const Decoded d = decode(in, 4093);
  REQUIRE(d.fed);
  CHECK(d.finished);
  CHECK(d.out == disk);
}
