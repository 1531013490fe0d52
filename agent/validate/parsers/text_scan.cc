#include "agent/validate/parsers/text_scan.h"

#include <cctype>
#include <charconv>
#include <cmath>

namespace kiln::agent::scan {

namespace {
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'; }
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
}  // namespace

std::string strip_ansi(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const char c = text[i];
    if (c == '\r') {
      ++i;
      continue;
    }
    if (c != '\x1b') {
      out.push_back(c);
      ++i;
      continue;
    }
    // ESC: work out how long the sequence is and skip it.
    if (i + 1 >= n) break;
    const char kind = text[i + 1];
    if (kind == '[') {
      std::size_t j = i + 2;
      while (j < n && static_cast<unsigned char>(text[j]) >= 0x20 &&
             static_cast<unsigned char>(text[j]) <= 0x3f)
        ++j;  // parameter + intermediate bytes
      while (j < n && static_cast<unsigned char>(text[j]) >= 0x20 &&
             static_cast<unsigned char>(text[j]) <= 0x2f)
        ++j;
      i = (j < n) ? j + 1 : n;  // final byte (or truncated)
    } else if (kind == ']') {
      std::size_t j = i + 2;
      while (j < n && text[j] != '\a' && !(text[j] == '\x1b' && j + 1 < n && text[j + 1] == '\\'))
        ++j;
      if (j >= n) i = n;
      else i = (text[j] == '\a') ? j + 1 : j + 2;
    } else {
      i += 2;
    }
  }
  return out;
}

std::vector<std::string> lines(std::string_view text) {
  const std::string clean = strip_ansi(text);
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < clean.size()) {
    const std::size_t nl = clean.find('\n', start);
    if (nl == std::string::npos) {
      out.emplace_back(clean.substr(start));
      break;
    }
    out.emplace_back(clean.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

std::string_view strip_mpi_tag(std::string_view line, int* rank) {
  if (rank) *rank = -1;
  // "[1,12]<stdout>:" — jobid, rank, stream.
  if (line.size() < 5 || line[0] != '[') return line;
  const std::size_t comma = line.find(',');
  const std::size_t close = line.find(']');
  if (comma == std::string_view::npos || close == std::string_view::npos || comma > close) return line;
  if (!to_int(line.substr(1, comma - 1))) return line;
  const auto r = to_int(line.substr(comma + 1, close - comma - 1));
  if (!r) return line;
  std::string_view rest = line.substr(close + 1);
  for (std::string_view tag : {"<stdout>:", "<stderr>:", "<stddiag>:"}) {
    if (starts_with(rest, tag)) {
      if (rank) *rank = static_cast<int>(*r);
      return rest.substr(tag.size());
    }
  }
  return line;
}

std::string_view ltrim(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return s.substr(i);
}

std::string_view rtrim(std::string_view s) {
  std::size_t n = s.size();
  while (n > 0 && is_space(s[n - 1])) --n;
  return s.substr(0, n);
}

std::string_view trim(std::string_view s) { return rtrim(ltrim(s)); }

std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    const std::size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::vector<std::string_view> split_on(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t p = s.find(sep, start);
    if (p == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, p - start));
    start = p + 1;
  }
}

std::vector<std::string_view> split_columns(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    while (i < n && is_space(s[i])) ++i;
    const std::size_t start = i;
    // A column ends at a tab or at two consecutive spaces.
    while (i < n && s[i] != '\t' && !(s[i] == ' ' && i + 1 < n && is_space(s[i + 1]))) ++i;
    const std::string_view cell = rtrim(s.substr(start, i - start));
    if (!cell.empty()) out.push_back(cell);
  }
  return out;
}

std::string collapse_ws(std::string_view s) {
  std::string out;
  for (std::string_view tok : split_ws(s)) {
    if (!out.empty()) out.push_back(' ');
    out.append(tok);
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

bool icontains(std::string_view s, std::string_view needle) {
  if (needle.empty()) return true;
  if (needle.size() > s.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= s.size(); ++i) {
    std::size_t k = 0;
    while (k < needle.size() && lower(s[i + k]) == lower(needle[k])) ++k;
    if (k == needle.size()) return true;
  }
  return false;
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

std::optional<std::int64_t> to_int(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> to_double(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<double> leading_double(std::string_view s) {
  s = ltrim(s);
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::string_view> after(std::string_view s, std::string_view marker) {
  const std::size_t p = s.find(marker);
  if (p == std::string_view::npos) return std::nullopt;
  return s.substr(p + marker.size());
}

}  // namespace kiln::agent::scan
