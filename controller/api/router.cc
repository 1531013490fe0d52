#include "controller/api/router.h"

#include <cassert>

#include "common/json_text.h"

namespace kiln::api {
namespace {

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  // path starts with '/'; "/a/b" -> {"a","b"}; "/" -> {""}
  std::size_t pos = 1;
  while (true) {
    std::size_t next = path.find('/', pos);
    if (next == std::string_view::npos) {
      out.push_back(path.substr(pos));
      break;
    }
    out.push_back(path.substr(pos, next - pos));
    pos = next + 1;
  }
  return out;
}

bool is_capture(std::string_view seg) {
  return seg.size() > 2 && seg.front() == '{' && seg.back() == '}';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::size_t Router::add(bhttp::verb method, std::string pattern) {
  assert(!pattern.empty() && pattern.front() == '/');
#ifndef NDEBUG
  for (const Entry& e : entries_) assert(!(e.method == method && e.pattern == pattern));
#endif
  Compiled c;
  for (std::string_view seg : split_path(pattern)) c.segments.emplace_back(seg);
  entries_.push_back(Entry{method, std::move(pattern)});
  compiled_.push_back(std::move(c));
  return entries_.size() - 1;
}

RouteMatch Router::match(bhttp::verb method, std::string_view path) const {
  RouteMatch result;
  if (path.empty() || path.front() != '/') return result;
  std::vector<std::string_view> parts = split_path(path);
  for (std::size_t i = 0; i < compiled_.size(); ++i) {
    const Compiled& c = compiled_[i];
    if (c.segments.size() != parts.size()) continue;
    PathParams params;
    bool ok = true;
    for (std::size_t s = 0; s < parts.size() && ok; ++s) {
      const std::string& seg = c.segments[s];
      if (is_capture(seg)) {
        std::optional<std::string> value = percent_decode(parts[s], false);
        // A capture names a row (a node, an image...): bytes no name can
        // hold match nothing here, rather than reach the store, where
        // PostgreSQL would end a value at its NUL or refuse the bytes.
        if (!value || value->empty() || value->find('\0') != std::string::npos || !is_valid_utf8(*value))
          ok = false;
        else params.emplace(seg.substr(1, seg.size() - 2), std::move(*value));
      } else if (seg != parts[s]) {
        ok = false;
      }
    }
    if (!ok) continue;
    if (entries_[i].method == method) {
      result.kind = RouteMatch::Kind::kFound;
      result.index = i;
      result.pattern = &entries_[i].pattern;
      result.params = std::move(params);
      result.allowed.clear();
      return result;
    }
    result.kind = RouteMatch::Kind::kMethodNotAllowed;
    result.allowed.push_back(entries_[i].method);
  }
  return result;
}

}  // namespace kiln::api
