#include "controller/api/problem.h"

#include <cctype>
#include <string>

#include "common/json_text.h"

namespace kiln::api {
namespace {

// Retry-After (RFC 9110 10.2.3) on every 503 and 507, in seconds. Each is a
// condition that passes by itself or by an operator's hand (the database
// restarting, a full disk being cleared, a kilnd starting): long
// enough that a client's retry loop does not hammer a kilnd that cannot
// write, short enough that it resumes soon after recovery.
constexpr int kRetryAfterSeconds = 5;

constexpr Code kAllCodes[] = {
    Code::kInvalidArgument, Code::kUnauthenticated, Code::kPermissionDenied, Code::kNotFound,
    Code::kMethodNotAllowed, Code::kConflict, Code::kPreconditionFailed, Code::kPayloadTooLarge,
    Code::kUnsupportedMedia, Code::kUnprocessable, Code::kUnavailable, Code::kInsufficientStorage, Code::kTimeout,
    Code::kDriverError, Code::kInternal,
};

}  // namespace

Code code_for_status(int status) {
  for (Code c : kAllCodes)
    if (http_status(c) == status) return c;
  return status >= 500 ? Code::kInternal : Code::kInvalidArgument;
}

nlohmann::json problem_json(const Error& error, int status) {
  if (status == 0) status = http_status(error.code);
  nlohmann::json errors = nlohmann::json::array();
  for (const FieldError& f : error.fields)
    errors.push_back({{"field", f.field}, {"message", f.message}});
  std::string_view reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  // RFC 9457 3.1.3: a type's title does not change between occurrences. A
  // status no Code maps to (431, 416) is its own problem type, named after
  // the status, so it never shares a type with a different title.
  std::string type = "https://kiln.dev/problems/";
  if (status == http_status(error.code)) {
    type += code_name(error.code);
  } else {
    for (char c : reason) type += c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return {
      {"type", std::move(type)},
      {"title", std::string(reason)},
      {"status", status},
      {"detail", error.message},
      {"errors", std::move(errors)},
  };
}

http::Response problem_response(const Error& error, unsigned http_version, bool keep_alive,
                                int status) {
  if (status == 0) status = http_status(error.code);
  http::Response res{static_cast<bhttp::status>(status), http_version};
  res.set(bhttp::field::content_type, "application/problem+json");
  res.set(bhttp::field::cache_control, "no-store");
  if (error.code == Code::kUnauthenticated) res.set(bhttp::field::www_authenticate, "Bearer");
  if (status == 503 || status == 507) res.set(bhttp::field::retry_after, std::to_string(kRetryAfterSeconds));
  res.keep_alive(keep_alive);
  res.body() = dump_json(problem_json(error, status));
  res.prepare_payload();
  return res;
}

}  // namespace kiln::api
