#pragma once
// Router: matches (method, path) against path templates such as
// "/v1/nodes/{id}/states/power". A template is split into literal segments and
// {name} captures; a capture matches one non-empty path segment (percent-
// decoded) that is valid UTF-8 without a NUL byte: any other segment is no
// name Kiln holds, so the path is 404. Matching is exact: no trailing
// slashes, no prefixes.
//
// match() distinguishes "no template matches the path" (404) from "a template
// matches but not for this method" (405, with the methods that would be
// allowed, for the Allow header). The router knows nothing about handlers:
// add() returns an index the caller uses to find its own handler.
//
// Thread-safety: add() during set-up only; match() and routes() are const and
// safe from any thread afterwards.

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/http/verb.hpp>

namespace kiln::api {

namespace bhttp = boost::beast::http;

using PathParams = std::map<std::string, std::string, std::less<>>;

struct RouteMatch {
  enum class Kind { kFound, kNotFound, kMethodNotAllowed };
  Kind kind = Kind::kNotFound;
  std::size_t index = 0;               // valid when kFound
  const std::string* pattern = nullptr;  // the matched template (kFound)
  PathParams params;                   // captures (kFound)
  std::vector<bhttp::verb> allowed;    // methods the path accepts (kMethodNotAllowed)
};

class Router {
 public:
  struct Entry {
    bhttp::verb method;
    std::string pattern;
  };

  // Registers `pattern` for `method`; returns its index (0, 1, ...).
  // Asserts the pattern starts with '/' and is not registered twice.
  std::size_t add(bhttp::verb method, std::string pattern);

  // `path` is the request target without the query string.
  RouteMatch match(bhttp::verb method, std::string_view path) const;

  // Every registered (method, template), in registration order.
  const std::vector<Entry>& routes() const { return entries_; }

 private:
  struct Compiled {
    std::vector<std::string> segments;  // "{id}" segments are captures
  };
  std::vector<Entry> entries_;
  std::vector<Compiled> compiled_;
};

// Decodes %XX escapes; nullopt on a malformed escape. `plus_is_space` for query strings.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

}  // namespace kiln::api
