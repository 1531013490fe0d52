#include "controller/ironic/ironic_version.h"

#include <cctype>
#include <charconv>

#include "common/http/field_value.h"

namespace kiln::ironic {
namespace {

std::string range_text() { return "[" + kMinVersion.str() + ", " + kMaxVersion.str() + "]"; }

bool equals_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// A run of 1-4 ASCII digits, the whole of `s`.
bool small_number(std::string_view s, int& out) {
  if (s.empty() || s.size() > 4) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  std::from_chars(s.data(), s.data() + s.size(), out);
  return true;
}

// The version named by an `OpenStack-API-Version` value for baremetal, if any.
// The value is a comma-separated list of "<service> <version>".
std::optional<std::string_view> standard_header_version(std::string_view value) {
  while (!value.empty()) {
    std::size_t comma = value.find(',');
    std::string_view item = http::trim_ows(value.substr(0, comma));
    std::size_t space = item.find(' ');
    if (space != std::string_view::npos && equals_ignore_case(item.substr(0, space), "baremetal"))
      return http::trim_ows(item.substr(space + 1));
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return std::nullopt;
}

nlohmann::json version_object(std::string_view endpoint) {
  return {{"id", "v1"},
          {"links", nlohmann::json::array({{{"href", std::string(endpoint) + "/v1/"}, {"rel", "self"}}})},
          {"status", "CURRENT"},
          {"min_version", kMinVersion.str()},
          {"version", kMaxVersion.str()}};
}

nlohmann::json resource_links(std::string_view endpoint, std::string_view name) {
  std::string self = std::string(endpoint) + "/v1/" + std::string(name) + "/";
  std::string bookmark = std::string(endpoint) + "/" + std::string(name) + "/";
  return nlohmann::json::array({{{"href", self}, {"rel", "self"}}, {{"href", bookmark}, {"rel", "bookmark"}}});
}

}  // namespace

std::string ApiVersion::str() const { return std::to_string(major) + "." + std::to_string(minor); }

Result<ApiVersion> parse_version(std::string_view text) {
  text = http::trim_ows(text);
  if (equals_ignore_case(text, "latest")) return kMaxVersion;
  std::size_t dot = text.find('.');
  ApiVersion v;
  if (dot == std::string_view::npos || !small_number(text.substr(0, dot), v.major) ||
      !small_number(text.substr(dot + 1), v.minor))
    return Error::invalid(std::string(kVersionHeader),
                          "invalid value for " + std::string(kVersionHeader) +
                              " header: expected <major>.<minor> or latest; the supported version range is: " +
                              range_text());
  if (v.major != kMinVersion.major)
    return Error::invalid(std::string(kVersionHeader),
                          "mutually exclusive versions requested: version " + v.str() +
                              " requested but not supported by this service; the supported version range is: " +
                              range_text());
  if (v < kMinVersion || v > kMaxVersion)
    return Error::invalid(std::string(kVersionHeader),
                          "version " + v.str() +
                              " was requested but the minor version is not supported by this service; "
                              "the supported version range is: " + range_text());
  return v;
}

Result<ApiVersion> requested_version(const http::Request& req) {
  auto standard = req.find(kStandardVersionHeader);
  if (standard != req.end()) {
    if (std::optional<std::string_view> v = standard_header_version(standard->value())) return parse_version(*v);
  }
  auto legacy = req.find(kVersionHeader);
  if (legacy != req.end()) return parse_version(legacy->value());
  return kMinVersion;
}

void set_version_headers(http::Response& res, ApiVersion served) {
  res.set(kMinVersionHeader, kMinVersion.str());
  res.set(kMaxVersionHeader, kMaxVersion.str());
  res.set(kVersionHeader, served.str());
  res.set(kStandardVersionHeader, "baremetal " + served.str());
}

nlohmann::json root_document(std::string_view endpoint) {
  nlohmann::json v = version_object(endpoint);
  return {{"name", "OpenStack Ironic API"},
          {"description",
           "Kiln's Ironic-compatible API: the part of Ironic's REST API that Ironic's clients use, "
           "over Kiln's nodes."},
          {"default_version", v},
          {"versions", nlohmann::json::array({v})}};
}

nlohmann::json v1_document(std::string_view endpoint) {
  const std::string base(endpoint);
  return {{"id", "v1"},
          {"links", nlohmann::json::array({{{"href", base + "/v1/"}, {"rel", "self"}},
                                           {{"href", "https://docs.openstack.org/ironic/latest/contributor/webapi.html"},
                                            {"rel", "describedby"},
                                            {"type", "text/html"}}})},
          {"media_types", nlohmann::json::array({{{"base", "application/json"},
                                                  {"type", "application/vnd.openstack.ironic.v1+json"}}})},
          {"nodes", resource_links(endpoint, "nodes")},
          {"ports", resource_links(endpoint, "ports")},
          {"drivers", resource_links(endpoint, "drivers")},
          {"version", version_object(endpoint)}};
}

}  // namespace kiln::ironic
