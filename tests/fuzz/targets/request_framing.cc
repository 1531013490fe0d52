// Request heads as the HTTP server reads them: Beast's request parser, then
// check_request_framing (common/http/request_framing.h).
//
// Two oracles: what the check accepts with a Transfer-Encoding, Beast frames
// as chunked (the server's guard for the opposite never fires); and the check
// agrees with a reference written the plain way (every Transfer-Encoding
// line joined, split at commas, trimmed, empties dropped, lower-cased: the
// request passes exactly when that list is {"chunked"}, the version is 1.1 or
// later and there is no Content-Length).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/beast/http.hpp>

#include "common/http/request_framing.h"

namespace {

namespace bhttp = boost::beast::http;

std::vector<std::string> codings(const kiln::http::RequestHeader& h) {
  std::string joined;
  auto lines = h.equal_range(bhttp::field::transfer_encoding);
  for (auto it = lines.first; it != lines.second; ++it) joined += std::string(it->value()) + ",";
  std::vector<std::string> out;
  std::string cur;
  for (char c : joined + ",") {
    if (c != ',') {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      continue;
    }
    const auto first = cur.find_first_not_of(" \t");
    if (first != std::string::npos) out.push_back(cur.substr(first, cur.find_last_not_of(" \t") - first + 1));
    cur.clear();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bhttp::request_parser<bhttp::empty_body> parser;
  parser.header_limit(16 * 1024);
  parser.eager(false);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (!parser.is_header_done()) return 0;
  const kiln::http::RequestHeader& h = parser.get();
  const bool has_te = h.count(bhttp::field::transfer_encoding) > 0;
  const bool ok = static_cast<bool>(kiln::http::check_request_framing(h));

  if (ok && has_te && !parser.chunked()) __builtin_trap();
  const bool expected = !has_te || (h.version() >= 11 && h.count(bhttp::field::content_length) == 0 &&
                                    codings(h) == std::vector<std::string>{"chunked"});
  if (ok != expected) __builtin_trap();
  return 0;
}
