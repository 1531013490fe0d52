#pragma once
// Pieces of HTTP field values (RFC 9110 section 5.5-5.6): optional
// whitespace (OWS) is spaces and horizontal tabs, nothing else.

#include <string_view>

namespace kiln::http {

constexpr bool is_ows(char c) { return c == ' ' || c == '\t'; }

// `s` without the OWS at both ends.
constexpr std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace kiln::http
