// The agent's raw+sparse decoder (agent/deploy/stream_decoder.h): the bytes
// kilnd serves as a converted qcow2, fed as the network cuts them. The first
// byte picks the read size; the rest is the stream.
//
// Oracles: the same stream fed in one piece and in pieces gives the same
// output and the same verdict; a stream that finishes cleanly produced
// exactly what its header promised (bounded here: the sink refuses past
// 64 MiB, as the agent's stops at the disk's end).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/deploy/stream_decoder.h"
#include "common/sparse_image.h"

namespace {

constexpr size_t kMaxOut = size_t{64} << 20;

struct Run {
  bool ok = false;
  std::string out_digest;  // size and a cheap checksum: the output can be large
  size_t out = 0;
};

Run decode(const uint8_t* p, size_t n, size_t step) {
  Run r;
  auto dec = kiln::agent::StreamDecoder::create("raw+sparse");
  if (!dec) std::abort();
  uint64_t sum = 0;
  const kiln::agent::ByteSink sink = [&](const char* d, size_t k) -> kiln::Status {
    if (r.out + k > kMaxOut) return kiln::Error(kiln::Code::kInvalidArgument, "past the disk's end");
    for (size_t i = 0; i < k; ++i) sum = sum * 31 + static_cast<uint8_t>(d[i]);
    r.out += k;
    return kiln::ok_status();
  };
  for (size_t at = 0; at < n; at += step) {
    if (!(*dec)->feed(reinterpret_cast<const char*>(p + at), std::min(step, n - at), sink)) {
      r.out_digest = std::to_string(r.out) + ":" + std::to_string(sum);
      return r;
    }
  }
  r.ok = (*dec)->finish().ok();
  r.out_digest = std::to_string(r.out) + ":" + std::to_string(sum);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t step = data[0] % 64 + 1;
  const uint8_t* p = data + 1;
  const size_t n = size - 1;
  const Run whole = decode(p, n, n == 0 ? 1 : n);
  const Run cut = decode(p, n, step);
  if (whole.ok != cut.ok) std::abort();
  if (whole.ok && whole.out_digest != cut.out_digest) std::abort();
  if (whole.ok) {
    // A clean finish means the header's blocks came out in full.
    if (n < kiln::sparse::kFileHeaderBytes) std::abort();
    const uint64_t promised = uint64_t{kiln::sparse::load_le32(p + 12)} * kiln::sparse::load_le32(p + 16);
    if (whole.out != promised) std::abort();
  }
  return 0;
}
