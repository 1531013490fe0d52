#pragma once
// RFC 9457 problem details: every error Kiln's API returns is
//   Content-Type: application/problem+json
//   {"type", "title", "status", "detail", "errors": [{"field", "message"}]}
// The status comes from kiln::http_status(Code), the single Code->HTTP mapping.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/http/server.h"

namespace kiln::api {

namespace bhttp = boost::beast::http;

// The problem document for `error`. `status` overrides http_status(code)
// only for statuses no Code maps to (431 from the transport, 416); 0 = derive
// it. Such a status is its own problem type, named after its reason phrase
// (.../problems/request-header-fields-too-large), so one type has one title.
nlohmann::json problem_json(const Error& error, int status = 0);

// A complete response: status, problem+json body, Cache-Control: no-store.
// 401 adds WWW-Authenticate: Bearer. (405's Allow header is the caller's.)
http::Response problem_response(const Error& error, unsigned http_version = 11,
                                bool keep_alive = true, int status = 0);

// The Code whose http_status() is `status` (kInternal for unknown 5xx,
// kInvalidArgument for unknown 4xx). Used for errors the server raises itself.
Code code_for_status(int status);

}  // namespace kiln::api
