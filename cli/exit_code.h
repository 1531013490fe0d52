#pragma once
// The kiln CLI's exit codes, and the one place an Error becomes one of them
// and one line of text. Scripts and CI jobs branch on these numbers, so they
// never change meaning:
//   0 success; 1 failed (a node or allocation ended failed, or the API
//   refused for another reason); 2 usage or bad input; 3 timed out;
//   4 no capacity or over quota. 130 when Ctrl-C stopped a wait.

#include <string>

#include "common/error.h"

namespace kiln::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,
  kExitUsage = 2,
  kExitTimedOut = 3,
  kExitNoCapacity = 4,
  kExitInterrupted = 130,
};

// kInvalidArgument (bad flag, bad spec, an API 400/422) is 2; kTimeout is 3;
// a refusal naming `/count` with kConflict (409: too few nodes) or
// kPermissionDenied (403: over quota) is 4; anything else is 1.
int exit_code_for(const Error& error);

// The error as one line without the "error: " prefix: each field at fault as
// "field: message" (joined by "; "), or the message when no field is named.
std::string one_line(const Error& error);

}  // namespace kiln::cli
