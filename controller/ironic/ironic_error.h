#pragma once
// Ironic's error replies. Every error under the Ironic prefix is
//   Content-Type: application/json
//   {"error_message": "<JSON text of {\"faultcode\": \"Client\"|\"Server\",
//                      \"faultstring\": \"...\", \"debuginfo\": null}>"}
// as Ironic (wsme) writes it: the inner document is a string, which
// ironicclient, openstacksdk and gophercloud parse a second time. The
// faultstring is Kiln's message, which names the offending field
// ("/driver_info/redfish_address: ...") and Kiln's reason.
//
// Statuses are the ones Ironic answers with: ironic_status() takes
// kiln::http_status() (the one Code mapping) and folds the statuses Ironic
// never sends into the nearest one it does (412 -> 409, 422 -> 400, 502 and
// 504 -> 503), so clients branch on codes they know.

#include <string_view>

#include "common/error.h"
#include "common/http/server.h"

namespace kiln::ironic {

// Ironic's status for `code`.
int ironic_status(Code code);

// A complete error response with `status` and `faultstring` (faultcode
// Client below 500, Server from 500). Version headers are the caller's.
http::Response error_response(const http::Request& req, int status, std::string_view faultstring);

// error_response(req, ironic_status(e.code), e.message).
http::Response error_response(const http::Request& req, const Error& e);

}  // namespace kiln::ironic
