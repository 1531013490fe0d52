#include "common/http/url.h"

#include <algorithm>
#include <cctype>

#include <boost/asio/ip/address_v6.hpp>

namespace kiln::http {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

bool has_control_chars(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

std::string Url::bracketed_host() const {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

bool url_has_userinfo(std::string_view address) {
  std::size_t start = address.find("://");
  start = start == std::string_view::npos ? 0 : start + 3;
  std::size_t end = address.find_first_of("/?#", start);
  std::string_view authority = address.substr(start, end == std::string_view::npos ? end : end - start);
  return authority.find('@') != std::string_view::npos;
}

Result<Url> Url::parse(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Error(Code::kInvalidArgument, "url \"" + std::string(text) + "\": " + std::string(why));
  };
  if (has_control_chars(text) || text.find(' ') != std::string_view::npos) return bad("invalid characters");
  const auto sep = text.find("://");
  if (sep == std::string_view::npos) return bad("not an absolute URL");
  Url url;
  url.scheme = lower(text.substr(0, sep));
  if (url.scheme != "http" && url.scheme != "https") return bad("scheme must be http or https");

  std::string_view rest = text.substr(sep + 3);
  const auto end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  std::string_view tail = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (authority.find('@') != std::string_view::npos) return bad("credentials in URLs are not supported");

  std::string_view host;
  std::string_view port;
  bool has_port = false;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated IPv6 literal");
    host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("junk after IPv6 literal");
      has_port = true;
      port = after.substr(1);
    }
    boost::system::error_code ec;
    boost::asio::ip::make_address_v6(std::string(host), ec);
    if (ec) return bad("bad IPv6 literal");
  } else {
    const auto colon = authority.find(':');
    host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      has_port = true;
      port = authority.substr(colon + 1);
    }
  }
  if (host.empty()) return bad("missing host");
  url.host = lower(host);

  url.port = url.scheme == "https" ? 443 : 80;
  if (has_port && !port.empty()) {
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) {
          return c >= '0' && c <= '9';
        })) {
      return bad("bad port");
    }
    const unsigned long value = std::stoul(std::string(port));
    if (value == 0 || value > 65535) return bad("port out of range");
    url.port = static_cast<uint16_t>(value);
  }

  tail = tail.substr(0, tail.find('#'));
  if (tail.empty()) {
    url.target = "/";
  } else if (tail.front() == '?') {
    url.target = "/" + std::string(tail);
  } else {
    url.target = std::string(tail);
  }
  return url;
}

std::string Url::origin() const {
  return scheme + "://" + bracketed_host() + ":" + std::to_string(port);
}

}  // namespace kiln::http
