#include "bench/soak/findings.h"

#include <iostream>

namespace kiln::soak {

namespace {
// Examples kept per invariant: enough to see a pattern, not a flood.
constexpr std::size_t kExamples = 8;
}  // namespace

void Findings::checked(std::string_view name, int64_t items) {
  auto it = tallies_.find(name);
  if (it == tallies_.end()) it = tallies_.emplace(std::string(name), Tally{}).first;
  it->second.checks += 1;
  it->second.items += items;
}

void Findings::broken(std::string_view name, std::string message) {
  auto it = tallies_.find(name);
  if (it == tallies_.end()) it = tallies_.emplace(std::string(name), Tally{}).first;
  Tally& t = it->second;
  t.violations += 1;
  if (first_.empty()) {
    first_ = std::string(name) + ": " + message;
    std::cerr << "kiln-soak: BROKEN " << first_ << std::endl;
  } else if (verbose_) {
    std::cerr << "kiln-soak: BROKEN " << name << ": " << message << std::endl;
  }
  if (t.examples.size() < kExamples) t.examples.push_back(std::move(message));
}

nlohmann::json Findings::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, t] : tallies_)
    out[name] = {{"checks", t.checks}, {"items", t.items}, {"violations", t.violations}, {"examples", t.examples}};
  return out;
}

}  // namespace kiln::soak
