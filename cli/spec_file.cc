#include "cli/spec_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace kiln::cli {

namespace {

nlohmann::json plain_scalar(const std::string& s) {
  if (s == "~" || s == "null" || s == "Null" || s == "NULL" || s.empty()) return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  // YAML 1.2 core schema numbers: the JSON parser reads exactly those we accept.
  nlohmann::json n = nlohmann::json::parse(s, nullptr, false);
  if (!n.is_discarded() && n.is_number()) return n;
  return s;
}

nlohmann::json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& v : n) a.push_back(to_json(v));
      return a;
    }
    case YAML::NodeType::Scalar:
      // A quoted scalar has the non-specific tag "!": always a string.
      return n.Tag() == "!" ? nlohmann::json(n.Scalar()) : plain_scalar(n.Scalar());
    default:
      return nullptr;
  }
}

}  // namespace

Result<nlohmann::json> parse_yaml_text(const std::string& text, const std::string& source) {
  try {
    YAML::Node root = YAML::Load(text);
    return to_json(root);
  } catch (const YAML::Exception& e) {
    return Error::invalid(source, "not valid YAML or JSON at line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

Result<nlohmann::json> read_spec_file(const std::string& path) {
  std::stringstream buf;
  if (path == "-") {
    buf << std::cin.rdbuf();
  } else {
    std::ifstream in(path);
    if (!in) return Error::invalid(path, "cannot read: " + std::string(std::strerror(errno)));
    buf << in.rdbuf();
  }
  return parse_yaml_text(buf.str(), path == "-" ? "stdin" : path);
}

}  // namespace kiln::cli
