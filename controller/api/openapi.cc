#include "controller/api/openapi.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include <yaml-cpp/yaml.h>

namespace kiln::api {
namespace {

// YAML 1.2 core schema for plain scalars.
nlohmann::json plain_scalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  {
    int64_t i = 0;
    const char* b = s.data();
    const char* e = s.data() + s.size();
    if (*b == '+') ++b;
    auto [end, ec] = std::from_chars(b, e, i);
    if (ec == std::errc() && end == e) return i;
  }
  {
    // Floats: digits with '.', or an exponent; no hex, inf or nan spellings.
    bool looks_numeric = s.find_first_not_of("0123456789+-.eE") == std::string::npos &&
                         s.find_first_of("0123456789") != std::string::npos;
    if (looks_numeric) {
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (end == s.c_str() + s.size() && std::isfinite(d)) return d;
    }
  }
  return s;
}

nlohmann::json convert(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      // A quoted empty string is a scalar, never Null; "!" is still checked for safety.
      return node.Tag() == "!" ? nlohmann::json("") : nlohmann::json(nullptr);
    case YAML::NodeType::Scalar:
      if (node.Tag() == "!") return node.Scalar();
      return plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const YAML::Node& item : node) out.push_back(convert(item));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.Scalar()] = convert(kv.second);
      return out;
    }
    case YAML::NodeType::Undefined:
      break;
  }
  return nullptr;
}

}  // namespace

Result<nlohmann::json> yaml_to_json(std::string_view yaml) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return convert(root);
  } catch (const YAML::Exception& e) {
    return Error(Code::kInvalidArgument, std::string("invalid YAML: ") + e.what());
  }
}

const Result<nlohmann::json>& openapi_json() {
  static const Result<nlohmann::json> spec = [] {
    Result<nlohmann::json> r = yaml_to_json(openapi_yaml());
    if (!r) return Result<nlohmann::json>(Error(Code::kInternal, "embedded openapi.yaml: " + r.error().message));
    return r;
  }();
  return spec;
}

}  // namespace kiln::api
