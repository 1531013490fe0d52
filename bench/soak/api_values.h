#pragma once
// Reading the API's JSON the way every soak checker does: a field that is not
// the expected type reads as empty (a finding reports it; the soak goes on).

#include <string>

#include <nlohmann/json.hpp>

namespace kiln::soak {

// The string, or "" for null or any other type.
inline std::string str(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }

// A provision state a node passes through on its own (a step runs), as
// opposed to one it rests in until asked.
inline bool transient(const std::string& state) {
  return state == "verifying" || state == "inspecting" || state == "cleaning" || state == "burning_in" ||
         state == "deploying" || state == "validating";
}

}  // namespace kiln::soak
