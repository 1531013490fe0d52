#include "common/http/byte_range.h"

#include <algorithm>

#include "common/http/field_value.h"

namespace kiln::http {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// 1*DIGIT, saturating at UINT64_MAX: RFC 9110 puts no bound on the digits,
// and a number too large to hold is still larger than any body.
bool parse_digits(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (!is_digit(c)) return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    v = v > (UINT64_MAX - d) / 10 ? UINT64_MAX : v * 10 + d;
  }
  *out = v;
  return true;
}

// Whether decimal text `a` < `b` (both 1*DIGIT), exactly: saturated values
// cannot tell 10^25 from 10^30.
bool decimal_less(std::string_view a, std::string_view b) {
  a.remove_prefix(std::min(a.find_first_not_of('0'), a.size()));
  b.remove_prefix(std::min(b.find_first_not_of('0'), b.size()));
  return a.size() != b.size() ? a.size() < b.size() : a < b;
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

// The one non-empty element of a comma-separated list, or "" when the list
// has none or more than one (empty elements are skipped, RFC 9110 §5.6.1.2).
// One pass, no allocation, however many elements there are.
std::string_view only_element(std::string_view list) {
  std::string_view found;
  int count = 0;
  while (true) {
    const std::size_t comma = list.find(',');
    std::string_view element = trim_ows(list.substr(0, comma));
    if (!element.empty()) {
      if (++count > 1) return {};
      found = element;
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return found;
}

}  // namespace

RangeRequest parse_range(std::string_view header, uint64_t size) {
  const RangeRequest whole;
  std::string_view h = trim_ows(header);
  if (!iequals_prefix(h, "bytes=")) return whole;
  const std::string_view spec = only_element(h.substr(6));
  if (spec.empty()) return whole;  // none, or several ranges: serve it all
  const std::size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return whole;
  const std::string_view a = spec.substr(0, dash);
  const std::string_view b = spec.substr(dash + 1);

  RangeRequest unsatisfiable;
  unsatisfiable.kind = RangeRequest::Kind::kUnsatisfiable;
  RangeRequest out;
  out.kind = RangeRequest::Kind::kPartial;
  if (a.empty()) {  // suffix-range: "-N"
    uint64_t suffix = 0;
    if (!parse_digits(b, &suffix)) return whole;
    if (suffix == 0 || size == 0) return unsatisfiable;
    out.range.first = suffix >= size ? 0 : size - suffix;
    out.range.last = size - 1;
    return out;
  }
  uint64_t first = 0;
  if (!parse_digits(a, &first)) return whole;
  uint64_t last = UINT64_MAX;
  if (!b.empty()) {
    if (!parse_digits(b, &last)) return whole;
    if (decimal_less(b, a)) return whole;  // an invalid range-spec is ignored (RFC 9110 §14.1.1)
  }
  if (first >= size) return unsatisfiable;
  out.range.first = first;
  out.range.last = last >= size ? size - 1 : last;
  return out;
}

std::string content_range(const ByteRange& r, uint64_t size) {
  return "bytes " + std::to_string(r.first) + "-" + std::to_string(r.last) + "/" + std::to_string(size);
}

std::string unsatisfied_range(uint64_t size) { return "bytes */" + std::to_string(size); }

}  // namespace kiln::http
