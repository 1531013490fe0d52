#pragma once
// Conditional GET (RFC 9110 section 13.1.2) for the routes declared
// Caching::kUntilWrite (route_table.h): a poller that sends back the ETag it
// was given gets 304 Not Modified, without the body, while the answer is
// the same.
//
// A route's own ETag must change whenever its body does (a node's "<version>";
// the node's `conductor` is the one exception: it follows the ring, not the
// node). Routes that set none get one from the body's bytes.

#include <string>
#include <string_view>

#include "common/http/server.h"

namespace kiln::api {

// A strong ETag naming `body`'s bytes: "b" and 16 hex digits of a 64-bit hash
// (not cryptographic: a collision costs a poller one missed change, and
// nobody can choose the bytes of another caller's answer).
std::string body_etag(std::string_view body);

// Whether If-None-Match (`header`: "*", or a list of entity tags, weak or
// strong) names `etag` under the weak comparison GET uses.
bool none_match(std::string_view header, std::string_view etag);

// Gives `response` an ETag from its body (body_etag) when it has none.
void give_etag(http::Response& response);

// For a 200: give_etag() (from response.body(): call it before the body is
// shared), then, when `req` carries an If-None-Match naming that ETag, turns
// it into a 304 with the 200's headers but Content-Length, and no body.
void answer_conditionally(const http::Request& req, http::Reply& reply);

}  // namespace kiln::api
