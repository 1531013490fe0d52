#include "drivers/libvirt/uri.h"

#include <utility>

namespace kiln::libvirt {

namespace {
// The userinfo of `uri`'s authority as [begin, end) offsets, or npos when none.
std::pair<std::size_t, std::size_t> userinfo_of(std::string_view uri) {
  std::size_t start = uri.find("://");
  if (start == std::string_view::npos) return {std::string_view::npos, 0};
  start += 3;
  std::size_t end = uri.find_first_of("/?#", start);
  std::string_view authority = uri.substr(start, end == std::string_view::npos ? end : end - start);
  std::size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return {std::string_view::npos, 0};
  return {start, start + at};
}
}  // namespace

bool uri_has_password(std::string_view uri) {
  auto [begin, end] = userinfo_of(uri);
  return begin != std::string_view::npos && uri.substr(begin, end - begin).find(':') != std::string_view::npos;
}

std::string display_uri(std::string_view uri) {
  auto [begin, end] = userinfo_of(uri);
  std::string out(uri);
  if (begin == std::string_view::npos) return out;
  std::size_t colon = uri.substr(begin, end - begin).find(':');
  if (colon == std::string_view::npos) return out;
  return out.replace(begin + colon + 1, end - (begin + colon + 1), "***");
}

std::string scrub(std::string text, std::string_view secret) {
  if (secret.empty()) return text;
  for (std::size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 3))
    text.replace(at, secret.size(), "***");
  return text;
}

}  // namespace kiln::libvirt
