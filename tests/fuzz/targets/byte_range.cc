// HTTP Range headers against a body size (image content serving): the first
// 8 bytes are the size, the rest the header. A partial range always lies
// inside the body.
#include <cstdint>
#include <cstring>
#include <string_view>

#include "common/http/byte_range.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t body = 0;
  std::memcpy(&body, data, 8);
  body >>= (data[0] % 64);  // small sizes too
  std::string_view header(reinterpret_cast<const char*>(data + 8), size - 8);
  kiln::http::RangeRequest r = kiln::http::parse_range(header, body);
  if (r.kind == kiln::http::RangeRequest::Kind::kPartial) {
    if (r.range.first > r.range.last || r.range.last >= body) __builtin_trap();
    (void)kiln::http::content_range(r.range, body);
  }
  return 0;
}
