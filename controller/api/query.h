#pragma once
// Query strings and list pagination.
//
// Query::parse splits "a=1&b=x%20y" into decoded pairs (a repeated key keeps
// its last value). check_known() refuses parameters a route does not accept
// (400 naming the parameter), so typos such as ?provison_state= fail loudly
// instead of returning an unfiltered list.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/http/server.h"
#include "common/result.h"

namespace kiln::api {

namespace bhttp = boost::beast::http;

class Query {
 public:
  // `query` is the part after '?', without it. 400 (field = the key) on a bad
  // escape or a value that is not valid UTF-8 or holds a NUL byte once
  // decoded (field "query" when the key itself is such).
  static Result<Query> parse(std::string_view query);

  std::optional<std::string> get(std::string_view key) const;
  const std::map<std::string, std::string, std::less<>>& all() const { return values_; }
  Status check_known(const std::vector<std::string>& allowed) const;

  // ?limit=: default 100; 400 field "limit" unless an integer in 1..max.
  Result<int> limit(int default_limit = 100, int max = 1000) const;

 private:
  std::map<std::string, std::string, std::less<>> values_;
};

// Splits a request target into path and query ("" when none).
std::pair<std::string_view, std::string_view> split_target(std::string_view target);

// The absolute URL of `path` with `query` (encoded): scheme from the
// connection, authority from the Host header ("localhost" when absent).
std::string absolute_url(const http::Request& req, const http::RequestInfo& info,
                         std::string_view path, const std::map<std::string, std::string, std::less<>>& query);

std::string percent_encode(std::string_view s);

}  // namespace kiln::api
