#pragma once
// Error values shared by every Kiln component.
//
// Expected failures (bad input, wrong state, BMC unreachable, timeout) travel as
// Error values inside Result<T>; exceptions are caught at library boundaries and
// converted. Exactly one function, http_status(), maps a Code to an HTTP status.

#include <string>
#include <utility>
#include <vector>

namespace kiln {

enum class Code {
  kOk = 0,
  kInvalidArgument,    // 400: malformed or semantically wrong input
  kUnauthenticated,    // 401: missing or unknown token
  kPermissionDenied,   // 403: role may not do this
  kNotFound,           // 404: no such resource (or another tenant's)
  kMethodNotAllowed,   // 405
  kConflict,           // 409: duplicate, wrong state, node busy
  kPreconditionFailed, // 412: stale If-Match
  kPayloadTooLarge,    // 413
  kUnsupportedMedia,   // 415
  kUnprocessable,      // 422: well-formed but cannot be acted on
  kUnavailable,        // 503: overloaded, not ready, dependency down
  kInsufficientStorage,  // 507: a write failed for want of disk space (ENOSPC, EDQUOT, SQLITE_FULL)
  kTimeout,            // deadline passed (BMC, agent, step)
  kDriverError,        // a BMC / hypervisor said no; message carries its words
  kInternal,           // a bug or an unexpected library failure
};

// One offending input field: `field` is a JSON pointer ("/bmc/address") or a
// query/header name ("limit", "If-Match").
struct FieldError {
  std::string field;
  std::string message;
};

struct Error {
  Code code = Code::kInternal;
  std::string message;
  std::vector<FieldError> fields;

  Error() = default;
  Error(Code c, std::string m) : code(c), message(std::move(m)) {}
  Error(Code c, std::string m, std::vector<FieldError> f)
      : code(c), message(std::move(m)), fields(std::move(f)) {}

  // Convenience for the common single-field 400.
  static Error invalid(std::string field, std::string message) {
    std::string detail = field + ": " + message;
    return Error(Code::kInvalidArgument, std::move(detail),
                 {FieldError{std::move(field), std::move(message)}});
  }
};

// The one place a Code becomes an HTTP status.
int http_status(Code code);
// Short stable name, used as problem "type" suffix and in logs ("conflict").
const char* code_name(Code code);

}  // namespace kiln
