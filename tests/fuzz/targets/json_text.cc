// kiln::parse_json, the one entry point for untrusted JSON (API bodies, agent
// bodies, what BMCs send), dump_json / to_valid_utf8 on what it accepts, and
// parse_json_members (what a power read uses).
// Invariants: no crash, no stack exhaustion at any depth; an accepted
// document is at most max_depth deep and dumps to valid UTF-8 that parses
// back to the same value; parse_json_members accepts and refuses exactly
// what parse_json does, with the same message, and builds the named members
// of an object as parse_json builds them (anything else whole).
#include <cstdint>
#include <string_view>

#include "common/json_text.h"

namespace {

std::size_t depth(const nlohmann::json& j) {
  std::size_t d = 0;
  if (j.is_structured())
    for (const auto& v : j) d = std::max(d, depth(v));
  return j.is_structured() ? d + 1 : 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::JsonLimits limits;
  limits.max_depth = 64;
  kiln::Result<nlohmann::json> j = kiln::parse_json(text, limits);
  std::string fixed = kiln::to_valid_utf8(text);
  if (!kiln::is_valid_utf8(fixed)) __builtin_trap();
  static constexpr std::string_view kNames[] = {"a", "PowerState", ""};
  kiln::Result<nlohmann::json> some = kiln::parse_json_members(text, kNames, limits);
  if (bool(some) != bool(j)) __builtin_trap();
  if (!j && some.error().message != j.error().message) __builtin_trap();
  if (j) {
    nlohmann::json want = *j;
    if (j->is_object()) {
      want = nlohmann::json::object();
      for (std::string_view k : kNames)
        if (auto it = j->find(std::string(k)); it != j->end()) want[std::string(k)] = *it;
    }
    if (*some != want) __builtin_trap();
  }
  if (!j) return 0;
  if (depth(*j) > limits.max_depth) __builtin_trap();
  std::string out = kiln::dump_json(*j);
  if (!kiln::is_valid_utf8(out)) __builtin_trap();
  kiln::Result<nlohmann::json> back = kiln::parse_json(out, limits);
  if (!back || *back != *j) __builtin_trap();
  return 0;
}
