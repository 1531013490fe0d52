#pragma once
// Ironic's API microversions: the range Kiln serves, how a request names the
// one it wants, and the version documents at the API's root and at /v1.
//
// A request names a version with `X-OpenStack-Ironic-API-Version: 1.78` or
// the standard `OpenStack-API-Version: baremetal 1.78` (read first, as
// microversion-parse does); `latest` means the maximum; no header means the
// minimum, as Ironic treats a pre-microversion client. Anything else, or a
// version outside [kMinVersion, kMaxVersion], is refused (Ironic: 406).
//
// The range: the CLIs send 1.78 (and step down on 406), Metal3 requires a
// maximum of at least 1.89, terraform-provider-ironic sends 1.99. Behaviour a
// version gates (the state a node is created in, the fields a node shows)
// is decided by the routes from IronicCall::version (ironic_routes.h).
//
// Pure functions: no I/O, safe from any thread.

#include <compare>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/http/server.h"
#include "common/result.h"

namespace kiln::ironic {

struct ApiVersion {
  int major = 1;
  int minor = 1;
  auto operator<=>(const ApiVersion&) const = default;
  // "1.78"
  std::string str() const;
  // Whether this version is 1.`m` or later (Ironic's allow_* checks).
  bool at_least(int m) const { return major > 1 || (major == 1 && minor >= m); }
};

inline constexpr ApiVersion kMinVersion{1, 1};
inline constexpr ApiVersion kMaxVersion{1, 99};

inline constexpr std::string_view kVersionHeader = "X-OpenStack-Ironic-API-Version";
inline constexpr std::string_view kMinVersionHeader = "X-OpenStack-Ironic-API-Minimum-Version";
inline constexpr std::string_view kMaxVersionHeader = "X-OpenStack-Ironic-API-Maximum-Version";
inline constexpr std::string_view kStandardVersionHeader = "OpenStack-API-Version";

// Parses "1.78" (digits '.' digits, no sign, no spaces, each part at most 4
// digits) or "latest" (any case) against the range. Errors (kInvalidArgument,
// answered 406 by the caller): not a version, major other than 1, outside the
// range; the message says which and gives the range.
Result<ApiVersion> parse_version(std::string_view text);

// The version `req` asks for (header rules above); errors as parse_version.
// An OpenStack-API-Version header naming another service is ignored.
Result<ApiVersion> requested_version(const http::Request& req);

// Sets the three Ironic version headers (and OpenStack-API-Version:
// baremetal X) on `res`; `served` is the version the reply was made under.
void set_version_headers(http::Response& res, ApiVersion served);

// GET {endpoint}/ : {"name", "description", "default_version", "versions": [..]}.
// `endpoint` is the API's absolute URL without a trailing slash.
nlohmann::json root_document(std::string_view endpoint);

// GET {endpoint}/v1 : {"id": "v1", "links", "media_types", "nodes", "ports",
// "drivers", "version": {...}}.
nlohmann::json v1_document(std::string_view endpoint);

}  // namespace kiln::ironic
