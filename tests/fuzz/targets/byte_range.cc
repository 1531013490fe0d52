// HTTP Range headers against a body size (image content serving): the first
// 8 bytes are the size, the rest the header.
//
// Two oracles: a partial range always lies inside the body; and the one-pass
// parser agrees with a reference written the plain way (the list split into
// strings, numbers compared as decimal text, so no saturation shortcut can
// hide behind the same shortcut in the reference).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/byte_range.h"

namespace {

using kiln::http::RangeRequest;

std::string trim(std::string s) {
  auto ows = [](char c) { return c == ' ' || c == '\t'; };
  while (!s.empty() && ows(s.front())) s.erase(s.begin());
  while (!s.empty() && ows(s.back())) s.pop_back();
  return s;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Decimal text without leading zeros ("0" for zero).
std::string canonical(const std::string& s) {
  std::size_t i = s.find_first_not_of('0');
  return i == std::string::npos ? "0" : s.substr(i);
}

bool decimal_less(const std::string& a, const std::string& b) {
  std::string x = canonical(a), y = canonical(b);
  return x.size() != y.size() ? x.size() < y.size() : x < y;
}

// min(value, cap) for decimal text.
uint64_t decimal_min(const std::string& s, uint64_t cap) {
  const std::string c = std::to_string(cap);
  return decimal_less(s, c) ? std::stoull(canonical(s)) : cap;
}

RangeRequest reference(std::string_view header, uint64_t size) {
  RangeRequest whole, unsatisfiable, partial;
  unsatisfiable.kind = RangeRequest::Kind::kUnsatisfiable;
  partial.kind = RangeRequest::Kind::kPartial;
  std::string h = trim(std::string(header));
  if (h.size() < 6) return whole;
  std::string unit = h.substr(0, 6);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](char c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; });
  if (unit != "bytes=") return whole;
  std::vector<std::string> specs;
  std::string rest = h.substr(6);
  std::size_t start = 0;
  while (true) {
    std::size_t comma = rest.find(',', start);
    std::string e = trim(rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!e.empty()) specs.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (specs.size() != 1) return whole;
  const std::string& spec = specs[0];
  std::size_t dash = spec.find('-');
  if (dash == std::string::npos) return whole;
  std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  if (a.empty()) {
    if (!all_digits(b)) return whole;
    if (canonical(b) == "0" || size == 0) return unsatisfiable;
    uint64_t n = decimal_min(b, size);
    partial.range.first = size - n;
    partial.range.last = size - 1;
    return partial;
  }
  if (!all_digits(a)) return whole;
  if (!b.empty() && (!all_digits(b) || decimal_less(b, a))) return whole;
  if (!decimal_less(a, std::to_string(size))) return unsatisfiable;
  partial.range.first = std::stoull(canonical(a));
  partial.range.last = b.empty() ? size - 1 : decimal_min(b, size - 1);
  return partial;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t body = 0;
  std::memcpy(&body, data, 8);
  body >>= (data[0] % 64);  // small sizes too
  std::string_view header(reinterpret_cast<const char*>(data + 8), size - 8);
  RangeRequest r = kiln::http::parse_range(header, body);
  if (r.kind == RangeRequest::Kind::kPartial) {
    if (r.range.first > r.range.last || r.range.last >= body) __builtin_trap();
    (void)kiln::http::content_range(r.range, body);
  }
  RangeRequest want = reference(header, body);
  if (r.kind != want.kind) __builtin_trap();
  if (r.kind == RangeRequest::Kind::kPartial && (r.range.first != want.range.first || r.range.last != want.range.last))
    __builtin_trap();
  return 0;
}
