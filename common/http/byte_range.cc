#include "common/http/byte_range.h"

#include <charconv>

namespace kiln::http {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A non-empty run of digits that fits in uint64_t.
bool parse_u64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool iequals_prefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

}  // namespace

RangeRequest parse_range(std::string_view header, uint64_t size) {
  RangeRequest whole;
  std::string_view h = trim(header);
  if (!iequals_prefix(h, "bytes=")) return whole;
  std::string_view spec = trim(h.substr(6));
  if (spec.find(',') != std::string_view::npos) return whole;  // several ranges: serve it all
  const std::size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return whole;
  std::string_view a = trim(spec.substr(0, dash));
  std::string_view b = trim(spec.substr(dash + 1));

  RangeRequest out;
  out.kind = RangeRequest::Kind::kPartial;
  if (a.empty()) {
    uint64_t suffix = 0;
    if (!parse_u64(b, &suffix)) return whole;
    if (suffix == 0 || size == 0) {
      out.kind = RangeRequest::Kind::kUnsatisfiable;
      return out;
    }
    out.range.first = suffix >= size ? 0 : size - suffix;
    out.range.last = size - 1;
    return out;
  }
  uint64_t first = 0;
  if (!parse_u64(a, &first)) return whole;
  uint64_t last = UINT64_MAX;
  if (!b.empty()) {
    if (!parse_u64(b, &last)) return whole;
    if (last < first) return whole;  // syntactically invalid: ignored (RFC 9110 §14.1.1)
  }
  if (first >= size) {
    out.kind = RangeRequest::Kind::kUnsatisfiable;
    return out;
  }
  out.range.first = first;
  out.range.last = last >= size ? size - 1 : last;
  return out;
}

std::string content_range(const ByteRange& r, uint64_t size) {
  return "bytes " + std::to_string(r.first) + "-" + std::to_string(r.last) + "/" + std::to_string(size);
}

std::string unsatisfied_range(uint64_t size) { return "bytes */" + std::to_string(size); }

}  // namespace kiln::http
