#pragma once
// CheckResult: the one shape every validation check reports, on the node and
// in the stored report:
//
//   {"name": "hbm_bandwidth", "status": "pass" | "fail" | "skip",
//    "value": 4012.5 | null, "unit": "GB/s", "threshold": {"min": 4080} | null,
//    "details": {...}}
//
// `value` is the headline figure the threshold is applied to (null when the
// check measured nothing); `threshold` says which way it is compared ("min",
// "max" or "expected"); `details` carries the per-device figures and, for
// fail and skip, a "reason" sentence an operator can act on. kiln-agent and
// kiln-gpucheck both print this shape, so the plan runner merges
// kiln-gpucheck's output with from_json().

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::agent {

enum class CheckStatus { kPass, kFail, kSkip };

// "pass", "fail" or "skip".
const char* check_status_name(CheckStatus s);

struct CheckResult {
  std::string name;
  CheckStatus status = CheckStatus::kFail;
  nlohmann::json value;       // number or null
  std::string unit;
  nlohmann::json threshold;   // {"min": x} | {"max": x} | {"expected": x} | null
  nlohmann::json details = nlohmann::json::object();

  nlohmann::json to_json() const;

  // Reads one entry of a report or of kiln-gpucheck's "checks" array.
  // kInvalidArgument when `name` or `status` is missing or `status` is not
  // pass/fail/skip.
  static Result<CheckResult> from_json(const nlohmann::json& j);
};

// Helpers for the common endings; each sets details["reason"].
CheckResult check_fail(std::string name, std::string reason);
CheckResult check_skip(std::string name, std::string reason);

// Adds `reason` to details["reasons"] and makes the check fail; the first
// reason also becomes details["reason"]. Used while a check accumulates
// problems across devices.
void add_failure(CheckResult& r, const std::string& reason);
// Appends to details["warnings"] (shown, never fails a check by itself).
void add_warning(CheckResult& r, const std::string& warning);

}  // namespace kiln::agent
