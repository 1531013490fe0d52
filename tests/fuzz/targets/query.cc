// URL targets as the API splits and decodes them: split_target, then
// Query::parse of the query (percent-decoding, UTF-8 check), and
// percent_encode of every decoded value round-tripping through parse.
#include <cstdint>
#include <string_view>

#include "common/json_text.h"
#include "controller/api/query.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view target(reinterpret_cast<const char*>(data), size);
  auto [path, query] = kiln::api::split_target(target);
  if (path.size() + query.size() > target.size()) __builtin_trap();
  kiln::Result<kiln::api::Query> q = kiln::api::Query::parse(query);
  if (!q) return 0;
  for (const auto& [k, v] : q->all()) {
    if (!kiln::is_valid_utf8(k) || !kiln::is_valid_utf8(v)) __builtin_trap();
    std::string again = kiln::api::percent_encode(k) + "=" + kiln::api::percent_encode(v);
    kiln::Result<kiln::api::Query> back = kiln::api::Query::parse(again);
    if (!back) __builtin_trap();
  }
  return 0;
}
