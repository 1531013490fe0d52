#include <catch2/catch.hpp>

#include <sstream>

#include <yaml-cpp/yaml.h>

#include "cli/output.h"
#include "cli/progress.h"

using namespace kiln::cli;
using nlohmann::json;

namespace {

const json kItems = json::parse(R"([
  {"name": "node-a", "provision_state": "available", "maintenance": false, "traits": ["x", "y"], "updated_at": "2020-01-01T00:00:00.000Z"},
  {"name": "a-much-longer-node-name-than-the-rest", "provision_state": "deploying", "maintenance": true, "traits": [], "updated_at": null}
])");
const std::vector<Column> kCols = {{"name", "/name"}, {"provision_state", "/provision_state"}};
const std::vector<Column> kWide = {{"name", "/name"}, {"provision_state", "/provision_state"}, {"traits", "/traits"},
                                   {"updated_at", "/updated_at", true}};

std::string render(const OutputOptions& o) {
  std::ostringstream out;
  print_items(out, kItems, kCols, kWide, o);
  return out.str();
}

}  // namespace

TEST_CASE("output: table and --long and -c and value") {
  OutputOptions o;
  std::string t = render(o);
  CHECK(t.rfind("NAME", 0) == 0);
  CHECK(t.find("PROVISION STATE") != std::string::npos);
  CHECK(t.find("TRAITS") == std::string::npos);
  o.long_view = true;
  t = render(o);
  CHECK(t.find("x,y") != std::string::npos);
  CHECK(t.find(" ago") != std::string::npos);  // times are relative in tables
  o.long_view = false;
  o.columns = {"maintenance", "name"};
  o.format = Format::kValue;
  CHECK(render(o) == "false\tnode-a\ntrue\ta-much-longer-node-name-than-the-rest\n");
}

TEST_CASE("output: a table on a terminal fits its width") {
  OutputOptions o;
  o.width = 30;
  std::istringstream lines(render(o));
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    CHECK(line.size() <= 30);
    ++n;
  }
  CHECK(n == 3);
  CHECK(render(o).find("~") != std::string::npos);  // the long name was cut, and says so
}

TEST_CASE("output: json is the document as is and yaml reads back to the same document") {
  OutputOptions o;
  o.format = Format::kJson;
  CHECK(json::parse(render(o)) == kItems);
  const json tricky = {{"s", "true"}, {"n", "12"}, {"e", ""}, {"t", "yes"}, {"nul", nullptr}, {"num", 3}, {"b", false},
                       {"colon", "a: b"}, {"list", json::array({"-x", "#c"})}};
  YAML::Node y = YAML::Load(to_yaml(tricky));
  CHECK(y["s"].as<std::string>() == "true");
  CHECK(y["s"].Tag() == "!");  // quoted: a string, not a boolean
  CHECK(y["n"].Tag() == "!");
  CHECK(y["t"].Tag() == "!");
  CHECK(y["e"].as<std::string>().empty());
  CHECK(y["nul"].IsNull());
  CHECK(y["num"].as<int>() == 3);
  CHECK(y["colon"].as<std::string>() == "a: b");
  CHECK(y["list"][0].as<std::string>() == "-x");
  CHECK(y["list"][1].as<std::string>() == "#c");
  CHECK_FALSE(parse_format("xml").ok());
}

TEST_CASE("progress: plain lines only on change without control characters and a terminal redraws in place") {
  std::ostringstream plain;
  auto v = make_progress_view(plain, false, 0);
  v->show({{"workers/a0", "deploying", "write_image", 0.4}}, std::chrono::seconds(3));
  v->show({{"workers/a0", "deploying", "write_image", 0.4}}, std::chrono::seconds(4));
  v->show({{"workers/a0", "active", "", 1.0}}, std::chrono::seconds(9));
  CHECK(plain.str() == "[   3s] workers/a0: deploying (step write_image)\n[   9s] workers/a0: active\n");

  std::ostringstream tty;
  auto t = make_progress_view(tty, true, 80);
  t->show({{"a0", "deploying", "", 0.4}, {"a1", "available", "", 0.1}}, std::chrono::seconds(1));
  t->show({{"a0", "active", "", 1.0}, {"a1", "deploying", "", 0.4}}, std::chrono::seconds(2));
  CHECK(tty.str().find("\x1b[2A") != std::string::npos);  // back up over the two rows
  CHECK(tty.str().find("[####################] active") != std::string::npos);
}
