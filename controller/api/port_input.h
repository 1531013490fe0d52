#pragma once
// The body of POST /v1/ports, read and checked (pure; fuzzed by fuzz/api_bodies).

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::api {

struct PortInput {
  std::string node;  // the node's id or name, as given
  std::string mac;   // normalised: lower case, ':' separated
  bool pxe = true;
};

// kInvalidArgument listing every bad field by JSON pointer (/node, /address,
// /pxe, unknown fields).
Result<PortInput> parse_port_create(const nlohmann::json& body);

}  // namespace kiln::api
