#pragma once
// Health: the verdict a parser derives from the facts it extracted, in the
// shape every parser uses:
//
//   "health": {"status": "pass" | "fail", "reasons": [...], "warnings": [...]}
//
// `reasons` say why the status is "fail" (each one alone is enough to fail);
// `warnings` are worth showing an operator but do not fail the check on their
// own. Thresholds that depend on the node's profile (expected bandwidth, link
// counts, latency budgets) are NOT applied here: the validation gate compares
// the extracted values to the profile. Health only covers what the tool
// itself reports as wrong.

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::agent {

class Health {
 public:
  void fail(std::string reason) { reasons_.push_back(std::move(reason)); }
  void warn(std::string warning) { warnings_.push_back(std::move(warning)); }
  bool failed() const { return !reasons_.empty(); }

  nlohmann::json to_json() const {
    return nlohmann::json{{"status", failed() ? "fail" : "pass"},
                          {"reasons", reasons_},
                          {"warnings", warnings_}};
  }

 private:
  std::vector<std::string> reasons_;
  std::vector<std::string> warnings_;
};

}  // namespace kiln::agent
