// The typed latency extractions over parsed tool output
// (agent/validate/parsers/perftest.h perftest_latency_rows,
// nccl_tests.h nccl_small_message_latency) and the gdsio parser: what
// ib_send_lat / all_reduce_perf / gdsio print, which a broken or hostile node
// controls. The first byte picks the tool. Every row the extraction accepts
// must hold the bounds its header promises.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "agent/validate/parsers/gdsio.h"
#include "agent/validate/parsers/nccl_tests.h"
#include "agent/validate/parsers/perftest.h"

namespace {

bool in_us(double v) { return std::isfinite(v) && v >= 0 && v <= 1e7; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      auto parsed = kiln::agent::parse_perftest(text);
      if (!parsed) return 0;
      auto rows = kiln::agent::perftest_latency_rows(*parsed);
      if (!rows) return 0;
      for (const auto& r : *rows) {
        if (r.bytes < 1 || r.bytes > (int64_t{1} << 31) || r.iterations < 1) __builtin_trap();
        if (!in_us(r.min_us) || !in_us(r.max_us) || !in_us(r.typical_us)) __builtin_trap();
        if (r.typical_us < r.min_us || r.typical_us > r.max_us) __builtin_trap();
        if (r.p99_us && !in_us(*r.p99_us)) __builtin_trap();
      }
      return 0;
    }
    case 1: {
      auto parsed = kiln::agent::parse_nccl_tests(text);
      if (!parsed) return 0;
      auto points = kiln::agent::nccl_small_message_latency(*parsed);
      if (!points) return 0;
      if (points->empty()) __builtin_trap();
      for (const auto& p : *points)
        if (p.bytes < 1 || p.bytes > 65536 || !in_us(p.time_us)) __builtin_trap();
      return 0;
    }
    default: {
      auto parsed = kiln::agent::parse_gdsio(text);
      if (!parsed) return 0;
      for (const auto& r : (*parsed)["runs"]) {
        const double g = r["throughput_gib_s"].get<double>();
        if (!std::isfinite(g) || g < 0 || g > 1e6) __builtin_trap();
        if (r["threads"].get<int64_t>() < 1) __builtin_trap();
      }
      return 0;
    }
  }
}
