#pragma once
// BodyParser: a BMC's reply body to JSON, off the I/O threads when it is large.
//
// Most Redfish answers are a few KiB and parse in microseconds, so they are
// parsed where they arrive. Some are not: a chassis with hundreds of sensors
// inline, a log collection, an OEM tree run to hundreds of KiB or MiBs, at
// about 60 MB/s (nlohmann::json, measured) a millisecond or more each. Parsed
// on an I/O thread, such a body would hold up every other BMC's exchange on
// it, and a power sweep has a thousand in flight. So bodies of `inline_limit`
// bytes or more are parsed on the parser's own thread, and the caller's
// coroutine resumes on its own executor (the BMC's strand) once it is done.
//
// A body is untrusted: parse_json (common/json_text.h) bounds its nesting and
// checks its UTF-8; what it refuses reads as null, as an empty body does.
//
// Threading: parse() may be called from any executor, concurrently. The
// destructor waits for the parses in flight; none outlives the coroutine
// that asked for it, which stays suspended until its parse is done.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/blocking_pool.h"

namespace kiln::redfish {

class BodyParser {
 public:
  // Bodies of `inline_limit` bytes or more are parsed on the parser's thread
  // (RedfishDriverOptions::parse_inline_limit says why 32 KiB).
  explicit BodyParser(std::size_t inline_limit);
  BodyParser(const BodyParser&) = delete;
  BodyParser& operator=(const BodyParser&) = delete;

  // The JSON value of `body`; null when it is empty or not JSON. With
  // `members`, an object is built with only those top-level members
  // (parse_json_members); the caller keeps what `members` points at alive
  // until the parse returns.
  boost::asio::awaitable<nlohmann::json> parse(std::string body, std::span<const std::string_view> members = {});

  // How many bodies were parsed on the parser's thread (tests, benchmarks).
  uint64_t parsed_off_thread() const { return off_thread_.load(); }

 private:
  const std::size_t inline_limit_;
  std::atomic<uint64_t> off_thread_{0};
  BlockingPool pool_{1};  // last: joined before the rest goes
};

}  // namespace kiln::redfish
