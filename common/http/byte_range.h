#pragma once
// HTTP Range requests for one representation (RFC 9110 §14), as file replies
// need them: a single byte range, or the whole thing.
//
// Multiple ranges ("bytes=0-1,5-9") are answered with the whole body (200):
// the RFC allows a server to ignore Range, and the only clients that matter
// here (iPXE, the agent resuming a download, curl) ask for one range.

#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::http {

struct ByteRange {
  uint64_t first = 0;
  uint64_t last = 0;  // inclusive
  uint64_t length() const { return last - first + 1; }
};

struct RangeRequest {
  enum class Kind {
    kWhole,          // no Range, one we ignore (not bytes, malformed, several ranges): 200
    kPartial,        // `range` is satisfiable: 206
    kUnsatisfiable,  // 416 with Content-Range: bytes */size
  };
  Kind kind = Kind::kWhole;
  ByteRange range;
};

// Parses a Range header value ("" when absent) against a body of `size` bytes.
// "bytes=A-B" (B clamped to size-1), "bytes=A-" and "bytes=-N" (the last N
// bytes; N larger than the body means all of it) are understood. A range that
// starts at or past the end, and "bytes=-0", are unsatisfiable.
RangeRequest parse_range(std::string_view header, uint64_t size);

// "bytes A-B/size" for a 206 reply.
std::string content_range(const ByteRange& r, uint64_t size);
// "bytes */size" for a 416 reply.
std::string unsatisfied_range(uint64_t size);

}  // namespace kiln::http
