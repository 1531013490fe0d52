#include "cli/exit_code.h"

namespace kiln::cli {

int exit_code_for(const Error& error) {
  switch (error.code) {
    case Code::kInvalidArgument:
    case Code::kUnprocessable:
      return kExitUsage;
    case Code::kTimeout:
      return kExitTimedOut;
    case Code::kConflict:
    case Code::kPermissionDenied:
      // The allocation API names /count for "too few nodes" (409) and "over
      // quota" (403); any other 409/403 is a plain refusal.
      for (const FieldError& f : error.fields)
        if (f.field == "/count") return kExitNoCapacity;
      return kExitFailed;
    default:
      return kExitFailed;
  }
}

std::string one_line(const Error& error) {
  std::string out;
  for (const FieldError& f : error.fields) {
    if (!out.empty()) out += "; ";
    out += f.field.empty() ? f.message : f.field + ": " + f.message;
  }
  if (out.empty()) out = error.message;
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

}  // namespace kiln::cli
