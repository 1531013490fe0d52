#pragma once
// The body of POST /v1/hosts, read and checked (pure; fuzzed by fuzz/api_bodies).

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "controller/model/host.h"

namespace kiln::api {

struct HostInput {
  Host host;  // name, uri, username, options; no id, status or sealed password yet
  std::optional<std::string> password;  // to be sealed by the caller; never echoed
};

// kInvalidArgument listing every bad field by JSON pointer (/name, /uri,
// /username, /password, /options/..., unknown fields). A URI holding a
// password is refused without repeating it.
Result<HostInput> parse_host_create(const nlohmann::json& body);

}  // namespace kiln::api
