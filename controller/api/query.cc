#include "controller/api/query.h"

#include <charconv>
#include <cctype>

#include "common/json_text.h"
#include "controller/api/router.h"

namespace kiln::api {

Result<Query> Query::parse(std::string_view query) {
  Query q;
  std::size_t pos = 0;
  while (pos <= query.size() && !query.empty()) {
    std::size_t amp = query.find('&', pos);
    std::string_view part = query.substr(pos, amp == std::string_view::npos ? std::string_view::npos
                                                                            : amp - pos);
    if (!part.empty()) {
      std::size_t eq = part.find('=');
      std::string_view raw_key = part.substr(0, eq);
      std::string_view raw_value = eq == std::string_view::npos ? "" : part.substr(eq + 1);
      std::optional<std::string> key = percent_decode(raw_key, true);
      std::optional<std::string> value = percent_decode(raw_value, true);
      if (!key || !value)
        return Error::invalid(key ? *key : std::string(raw_key), "malformed percent-encoding");
      if (!is_valid_utf8(*key) || key->find('\0') != std::string::npos)
        return Error::invalid("query", "a parameter name is not valid UTF-8 or holds a NUL byte");
      if (!is_valid_utf8(*value)) return Error::invalid(*key, "is not valid UTF-8");
      // No value Kiln filters by holds one, and a NUL would end it early in
      // a PostgreSQL parameter or a C string (strtol).
      if (value->find('\0') != std::string::npos) return Error::invalid(*key, "must not hold a NUL byte (%00)");
      q.values_[*key] = *value;
    }
    if (amp == std::string_view::npos) break;
    pos = amp + 1;
  }
  return q;
}

std::optional<std::string> Query::get(std::string_view key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

Status Query::check_known(const std::vector<std::string>& allowed) const {
  for (const auto& [key, value] : values_) {
    bool known = false;
    for (const std::string& a : allowed) known = known || a == key;
    if (!known) return Error::invalid(key, "unknown query parameter");
  }
  return ok_status();
}

Result<int> Query::limit(int default_limit, int max) const {
  std::optional<std::string> v = get("limit");
  if (!v) return default_limit;
  int n = 0;
  auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || end != v->data() + v->size() || n < 1 || n > max)
    return Error::invalid("limit", "must be an integer from 1 to " + std::to_string(max));
  return n;
}

std::pair<std::string_view, std::string_view> split_target(std::string_view target) {
  std::size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::string percent_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == ',') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string absolute_url(const http::Request& req, const http::RequestInfo& info,
                         std::string_view path,
                         const std::map<std::string, std::string, std::less<>>& query) {
  auto host_it = req.find(bhttp::field::host);
  std::string host = host_it == req.end() ? std::string("localhost") : std::string(host_it->value());
  // A Host header is authority only; refuse anything that could inject a path.
  bool bad = host.empty();
  for (char c : host)
    bad = bad || c == '/' || c == '?' || c == '#' || c == '@' ||
          std::isspace(static_cast<unsigned char>(c));
  if (bad) host = "localhost";
  std::string url = (info.tls ? "https://" : "http://") + host + std::string(path);
  char sep = '?';
  for (const auto& [k, v] : query) {
    url.push_back(sep);
    url.append(percent_encode(k)).append("=").append(percent_encode(v));
    sep = '&';
  }
  return url;
}

}  // namespace kiln::api
