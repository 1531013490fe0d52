#pragma once
// HTTP Range requests for one representation (RFC 9110 §14), as file replies
// need them: a single byte range, or the whole thing.
//
// The header is untrusted input that anyone can send to the image content
// routes, so the parser is a single pass over the value with no allocation
// and no state proportional to the number of ranges:
//
//   - Several ranges ("bytes=0-1,5-9", or "bytes=0-0,0-0,..." a thousand
//     times, the classic amplification) are answered with the whole body
//     (200), never with multipart/byteranges: RFC 9110 §14.2 lets a server
//     ignore Range, and the only clients that matter here (iPXE, the agent
//     resuming a download, curl) ask for one range. Empty list elements
//     ("bytes=0-9,") do not count as ranges (RFC 9110 §5.6.1.2).
//   - Numbers are 1*DIGIT of any length; one past uint64_t saturates (a first
//     byte of 10^30 is past any end: 416; a last byte of 10^30 is the end).
//   - The grammar is applied strictly inside a range-spec: "bytes=0 - 9",
//     "bytes=+1-", "bytes=0x10-" are invalid, and an invalid header is
//     ignored (200, the whole body), as is a unit other than "bytes"
//     (compared case-insensitively). Whitespace around the whole value and
//     around list commas is allowed (OWS).
//   - A first byte past the last ("bytes=5-3") makes the spec invalid (RFC
//     9110 §14.1.1): ignored, 200.
//
// Thread-safety: pure functions.

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
  ByteRange range;  // meaningful for kPartial only: first <= last < size
};

// Parses a Range header value ("" when absent) against a body of `size` bytes.
// "bytes=A-B" (B clamped to size-1), "bytes=A-" and "bytes=-N" (the last N
// bytes; N larger than the body means all of it) are understood. A range that
// starts at or past the end, "bytes=-0", and any range of an empty body are
// unsatisfiable. Everything else is kWhole (see the top of the file).
RangeRequest parse_range(std::string_view header, uint64_t size);

// "bytes A-B/size" for a 206 reply.
std::string content_range(const ByteRange& r, uint64_t size);
// "bytes */size" for a 416 reply.
std::string unsatisfied_range(uint64_t size);

}  // namespace kiln::http
