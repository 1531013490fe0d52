#pragma once
// Absolute http(s) URLs as the project's HTTP client takes them (BMC
// addresses, image URLs), and the checks the API runs on addresses before
// they reach a client, a log line or an argv. Pure functions of their text:
// no I/O, any thread.

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln::http {

struct Url {
  std::string scheme;  // http | https
  std::string host;    // lowercase; an IPv6 literal without brackets
  uint16_t port = 0;
  std::string target;  // path + query, "/" when empty
  // Parses "https://host:port/path?q"; kInvalidArgument on anything else
  // (control characters or spaces, another scheme, credentials, a bad port).
  static Result<Url> parse(std::string_view url);
  std::string origin() const;          // "https://host:port"
  std::string bracketed_host() const;  // "[::1]" for IPv6, else host
};

// Whether `address` ("host[:port]" or a URL) carries a userinfo part
// ("user:pass@"): credentials that would end up in logs, errors and argv.
bool url_has_userinfo(std::string_view address);

// Whether `s` holds an ASCII control character (header injection, log forging).
bool has_control_chars(std::string_view s);

}  // namespace kiln::http
