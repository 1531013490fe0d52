#include "controller/api/conditional_get.h"

#include <cstdio>
#include <functional>

namespace kiln::api {

namespace bhttp = boost::beast::http;

std::string body_etag(std::string_view body) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "\"b%016zx\"", std::hash<std::string_view>{}(body));
  return buf;
}

bool none_match(std::string_view header, std::string_view etag) {
  auto opaque = [](std::string_view t) {
    if (t.starts_with("W/")) t.remove_prefix(2);
    return t;
  };
  const std::string_view want = opaque(etag);
  std::size_t pos = 0;
  while (pos < header.size()) {
    std::size_t comma = header.find(',', pos);
    std::string_view item = header.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item == "*" || (!item.empty() && opaque(item) == want)) return true;
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return false;
}

void give_etag(http::Response& response) {
  if (response.find(bhttp::field::etag) == response.end()) response.set(bhttp::field::etag, body_etag(response.body()));
}

void answer_conditionally(const http::Request& req, http::Reply& reply) {
  http::Response& response = reply.response;
  if (response.result() != bhttp::status::ok) return;
  give_etag(response);
  auto inm = req.find(bhttp::field::if_none_match);
  if (inm == req.end()) return;
  const std::string etag(response[bhttp::field::etag]);
  if (!none_match(inm->value(), etag)) return;
  // The 200's headers stay but Content-Length: clients that do not know a
  // 304 has no body would wait for one (nginx sends none either).
  response.result(bhttp::status::not_modified);
  response.erase(bhttp::field::content_length);
  response.body().clear();
  reply.shared_body.reset();
}

}  // namespace kiln::api
