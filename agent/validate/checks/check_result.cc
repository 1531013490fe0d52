#include "agent/validate/checks/check_result.h"

#include <utility>

namespace kiln::agent {

const char* check_status_name(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass: return "pass";
    case CheckStatus::kFail: return "fail";
    case CheckStatus::kSkip: return "skip";
  }
  return "fail";
}

nlohmann::json CheckResult::to_json() const {
  return nlohmann::json{{"name", name},   {"status", check_status_name(status)},
                        {"value", value}, {"unit", unit},
                        {"threshold", threshold}, {"details", details}};
}

Result<CheckResult> CheckResult::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Error(Code::kInvalidArgument, "check result is not an object");
  auto name = j.find("name");
  auto status = j.find("status");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    return Error(Code::kInvalidArgument, "check result has no name");
  if (status == j.end() || !status->is_string())
    return Error(Code::kInvalidArgument, "check " + name->get<std::string>() + " has no status");
  CheckResult r;
  r.name = name->get<std::string>();
  const std::string s = status->get<std::string>();
  if (s == "pass") r.status = CheckStatus::kPass;
  else if (s == "fail") r.status = CheckStatus::kFail;
  else if (s == "skip") r.status = CheckStatus::kSkip;
  else return Error(Code::kInvalidArgument, "check " + r.name + " has status '" + s + "'");
  if (auto v = j.find("value"); v != j.end() && (v->is_number() || v->is_null())) r.value = *v;
  if (auto u = j.find("unit"); u != j.end() && u->is_string()) r.unit = u->get<std::string>();
  if (auto t = j.find("threshold"); t != j.end()) r.threshold = *t;
  if (auto d = j.find("details"); d != j.end() && d->is_object()) r.details = *d;
  return r;
}

CheckResult check_fail(std::string name, std::string reason) {
  CheckResult r;
  r.name = std::move(name);
  r.status = CheckStatus::kFail;
  r.details["reason"] = std::move(reason);
  return r;
}

CheckResult check_skip(std::string name, std::string reason) {
  CheckResult r;
  r.name = std::move(name);
  r.status = CheckStatus::kSkip;
  r.details["reason"] = std::move(reason);
  return r;
}

void add_failure(CheckResult& r, const std::string& reason) {
  r.status = CheckStatus::kFail;
  if (!r.details.contains("reason")) r.details["reason"] = reason;
  r.details["reasons"].push_back(reason);
}

void add_warning(CheckResult& r, const std::string& warning) {
  r.details["warnings"].push_back(warning);
}

}  // namespace kiln::agent
