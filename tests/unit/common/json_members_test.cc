// parse_json_members: only the named top-level members of an object are
// built; the rest are still checked as parse_json checks them.

#include <string>
#include <string_view>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/json_text.h"

namespace {

using nlohmann::json;

constexpr std::string_view kPower[] = {"PowerState", "@odata.etag"};

// A ComputerSystem-like document whose other members nest objects, arrays
// and every kind of scalar, before and after the ones asked for.
const std::string kSystem = R"({
  "@odata.id": "/redfish/v1/Systems/1",
  "Boot": {"BootSourceOverrideTarget": "Pxe", "Allowed": ["Pxe", "Hdd", {"x": [1, [2, {"y": null}]]}]},
  "PowerState": "On",
  "ProcessorSummary": {"Count": 2, "Model": "x", "Healthy": true, "Watts": 1.5e2},
  "Links": [],
  "Empty": {},
  "@odata.etag": "W/\"7\"",
  "Trailing": [false, -3, "z"]
})";

}  // namespace

TEST_CASE("json members: only the named top-level members are built, in any position", "[json_text]") {
  kiln::Result<json> j = kiln::parse_json_members(kSystem, kPower);
  REQUIRE(j);
  CHECK(*j == json{{"PowerState", "On"}, {"@odata.etag", "W/\"7\""}});
  // Nothing named: the whole document, as parse_json builds it.
  kiln::Result<json> whole = kiln::parse_json_members(kSystem, {});
  REQUIRE(whole);
  CHECK(*whole == *kiln::parse_json(kSystem));
  CHECK(whole->size() == 8);
}

TEST_CASE("json members: a named member that is an object or array is built whole", "[json_text]") {
  constexpr std::string_view names[] = {"Boot", "Links"};
  kiln::Result<json> j = kiln::parse_json_members(kSystem, names);
  REQUIRE(j);
  CHECK(j->size() == 2);
  CHECK((*j)["Boot"]["Allowed"][2]["x"][1][1]["y"].is_null());
  CHECK((*j)["Links"] == json::array());
  // Members of nested objects with a named key's name are not top-level.
  constexpr std::string_view inner[] = {"Count"};
  CHECK(*kiln::parse_json_members(kSystem, inner) == json::object());
}

TEST_CASE("json members: a document that is not an object is built whole", "[json_text]") {
  kiln::Result<json> j = kiln::parse_json_members(R"([{"PowerState": "Off", "Other": 1}])", kPower);
  REQUIRE(j);
  CHECK(*j == json::array({{{"PowerState", "Off"}, {"Other", 1}}}));
  CHECK(*kiln::parse_json_members("\"On\"", kPower) == "On");
}

TEST_CASE("json members: members that are dropped are still checked for syntax, UTF-8 and depth", "[json_text]") {
  // Malformed inside a skipped member.
  kiln::Result<json> bad = kiln::parse_json_members(R"({"Other": {"a": [1, 2,]}, "PowerState": "On"})", kPower);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.find("malformed JSON") != std::string::npos);
  // Invalid UTF-8 inside a skipped member.
  kiln::Result<json> utf8 =
      kiln::parse_json_members("{\"Other\": \"\xC3\x28\", \"PowerState\": \"On\"}", kPower);
  REQUIRE_FALSE(utf8);
  CHECK(utf8.error().message.find("invalid UTF-8") != std::string::npos);
  // Too deep inside a skipped member: refused and named, as parse_json does.
  std::string deep = R"({"PowerState": "On", "Other": )" + std::string(100, '[') + std::string(100, ']') + "}";
  kiln::Result<json> too_deep = kiln::parse_json_members(deep, kPower);
  REQUIRE_FALSE(too_deep);
  kiln::Result<json> too_deep_whole = kiln::parse_json(deep);
  REQUIRE_FALSE(too_deep_whole);
  CHECK(too_deep.error().message == too_deep_whole.error().message);
  CHECK(too_deep.error().message.find("/Other/0/0") == 0);
}
