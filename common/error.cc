#include "common/error.h"

namespace kiln {

int http_status(Code code) {
  switch (code) {
    case Code::kOk: return 200;
    case Code::kInvalidArgument: return 400;
    case Code::kUnauthenticated: return 401;
    case Code::kPermissionDenied: return 403;
    case Code::kNotFound: return 404;
    case Code::kMethodNotAllowed: return 405;
    case Code::kConflict: return 409;
    case Code::kPreconditionFailed: return 412;
    case Code::kPayloadTooLarge: return 413;
    case Code::kUnsupportedMedia: return 415;
    case Code::kUnprocessable: return 422;
    case Code::kUnavailable: return 503;
    case Code::kInsufficientStorage: return 507;
    case Code::kTimeout: return 504;
    case Code::kDriverError: return 502;
    case Code::kInternal: return 500;
  }
  return 500;
}

const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid-argument";
    case Code::kUnauthenticated: return "unauthenticated";
    case Code::kPermissionDenied: return "permission-denied";
    case Code::kNotFound: return "not-found";
    case Code::kMethodNotAllowed: return "method-not-allowed";
    case Code::kConflict: return "conflict";
    case Code::kPreconditionFailed: return "precondition-failed";
    case Code::kPayloadTooLarge: return "payload-too-large";
    case Code::kUnsupportedMedia: return "unsupported-media-type";
    case Code::kUnprocessable: return "unprocessable";
    case Code::kUnavailable: return "unavailable";
    case Code::kInsufficientStorage: return "insufficient-storage";
    case Code::kTimeout: return "timeout";
    case Code::kDriverError: return "driver-error";
    case Code::kInternal: return "internal";
  }
  return "internal";
}

}  // namespace kiln
