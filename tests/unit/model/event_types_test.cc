// The one list of event types (controller/model/event_types.h): well formed,
// without repeats, the same list the OpenAPI document publishes, and the only
// place in the controller's code that spells a type.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "controller/model/event_types.h"
#include "source_text.h"

using namespace kiln;

TEST_CASE("event types: each is subject.what, lowercase, and listed once", "[model][events]") {
  const std::regex shape("^[a-z]+\\.[a-z_]+$");
  std::set<std::string_view> seen;
  for (std::string_view t : event_type::kAll) {
    INFO(t);
    CHECK(std::regex_match(std::string(t), shape));
    CHECK(seen.insert(t).second);
    CHECK(event_type::is_known(t));
  }
  CHECK_FALSE(event_type::is_known("node.create"));
  CHECK_FALSE(event_type::is_known(""));
  static_assert(event_type::is_known(event_type::kNodeCreated));
}

TEST_CASE("event types: the OpenAPI document's Event.type enum is the list", "[model][events]") {
  const std::string yaml = test::source_text("schemas/openapi.yaml");
  REQUIRE_FALSE(yaml.empty());
  const std::size_t event = yaml.find("\n    Event:\n");
  REQUIRE(event != std::string::npos);
  const std::size_t enum_at = yaml.find("enum: [", event);
  REQUIRE(enum_at < yaml.find("\n    Token:", event));  // inside Event, not a later schema
  const std::vector<std::string> listed = test::list_after(yaml, enum_at);
  std::vector<std::string> ours(event_type::kAll.begin(), event_type::kAll.end());
  CHECK(listed == ours);
}

TEST_CASE("event types: controller code names the constants, never the strings", "[model][events]") {
  // A literal "node.created" anywhere but event_types.h is a second list in
  // the making. Comments may mention types; code may not.
  const std::filesystem::path root = std::filesystem::path(KILN_SOURCE_DIR) / "controller";
  std::vector<std::string> offenders;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    const auto ext = entry.path().extension();
    if (!entry.is_regular_file() || (ext != ".cc" && ext != ".h")) continue;
    if (entry.path().filename() == "event_types.h") continue;
    std::ifstream in(entry.path());
    int lineno = 0;
    for (std::string line; std::getline(in, line);) {
      ++lineno;
      const std::string code = line.substr(0, line.find("//"));
      for (std::string_view t : event_type::kAll) {
        if (code.find("\"" + std::string(t) + "\"") != std::string::npos)
          offenders.push_back(entry.path().string() + ":" + std::to_string(lineno) + ": " + std::string(t));
      }
    }
  }
  INFO("literals outside controller/model/event_types.h:");
  for (const auto& o : offenders) UNSCOPED_INFO(o);
  CHECK(offenders.empty());
}
