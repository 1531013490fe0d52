#include "common/http/request_framing.h"

#include <string_view>

#include <boost/beast/core/string.hpp>

#include "common/http/field_value.h"

namespace kiln::http {

Status check_request_framing(const RequestHeader& header) {
  auto lines = header.equal_range(bhttp::field::transfer_encoding);
  if (lines.first == lines.second) return ok_status();
  if (header.version() < 11)
    return Error::invalid("Transfer-Encoding", "not allowed in an HTTP/1.0 request");
  if (header.count(bhttp::field::content_length) > 0)
    return Error::invalid("Transfer-Encoding", "not allowed together with Content-Length");

  // The codings of every line, in order, as one list (RFC 9110 section 5.3).
  std::size_t codings = 0;
  bool last_is_chunked = false;
  bool only_chunked = true;
  for (auto it = lines.first; it != lines.second; ++it) {
    std::string_view rest(it->value().data(), it->value().size());
    while (true) {
      const std::size_t comma = rest.find(',');
      const std::string_view element = trim_ows(rest.substr(0, comma));
      if (!element.empty()) {
        ++codings;
        last_is_chunked = boost::beast::iequals(element, "chunked");
        only_chunked = only_chunked && last_is_chunked;
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (!last_is_chunked)
    return Error::invalid("Transfer-Encoding", "the final transfer coding must be chunked");
  if (codings != 1 || !only_chunked)
    return Error::invalid("Transfer-Encoding", "only a single chunked transfer coding is implemented");
  return ok_status();
}

}  // namespace kiln::http
