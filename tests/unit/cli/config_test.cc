#include <catch2/catch.hpp>

#include <fstream>
#include <map>

#include "cli/config.h"
#include "cli/duration.h"
#include "cli/exit_code.h"
#include "common/clock.h"
#include "tests/support/scratch_dir.h"

using namespace kiln::cli;

namespace {

struct Env {
  std::map<std::string, std::string> vars;
  std::optional<std::string> operator()(const char* n) const {
    auto it = vars.find(n);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  }
};

}  // namespace

TEST_CASE("config: flags beat the environment which beats the file's context") {
  kiln::testing::ScratchDir dir;
  const std::string path = dir.path() + "/config.yaml";
  std::ofstream(path) << "current-context: lab\ncontexts:\n  lab: {url: 'http://lab:1/', token: labtok, ca_file: /ca.pem}\n"
                         "  prod: {url: 'https://prod:2', token: prodtok}\n";
  Env env{{{"KILN_CONFIG", path}}};
  auto c = load_config({}, env);
  REQUIRE(c.ok());
  CHECK(c->url == "http://lab:1");  // trailing slash dropped
  CHECK(c->token == "labtok");
  CHECK(c->ca_file == "/ca.pem");
  CHECK(c->context == "lab");

  c = load_config({std::nullopt, std::nullopt, std::nullopt, std::string("prod")}, env);
  REQUIRE(c.ok());
  CHECK(c->url == "https://prod:2");

  env.vars["KILN_TOKEN"] = "envtok";
  env.vars["KILN_URL"] = "http://env:3";
  c = load_config({}, env);
  REQUIRE(c.ok());
  CHECK(c->url == "http://env:3");
  CHECK(c->token == "envtok");

  c = load_config({std::string("http://flag:4"), std::string("flagtok"), std::nullopt, std::nullopt}, env);
  REQUIRE(c.ok());
  CHECK(c->url == "http://flag:4");
  CHECK(c->token == "flagtok");

  auto missing = load_config({std::nullopt, std::nullopt, std::nullopt, std::string("nope")}, env);
  REQUIRE_FALSE(missing.ok());
  CHECK(one_line(missing.error()) == "--context: no context nope in " + path);
  CHECK(exit_code_for(missing.error()) == kExitUsage);
}

TEST_CASE("config: no URL anywhere or a URL that is not http(s) is a usage error naming --url") {
  Env env{{{"KILN_CONFIG", "/nonexistent/kiln.yaml"}}};
  auto c = load_config({}, env);
  REQUIRE_FALSE(c.ok());
  CHECK(one_line(c.error()).find("--url: no kilnd URL") == 0);
  c = load_config({std::string("ftp://x"), std::nullopt, std::nullopt, std::nullopt}, env);
  REQUIRE_FALSE(c.ok());
  CHECK(one_line(c.error()).find("--url: must be an http(s)://host:port URL") == 0);
}

TEST_CASE("durations: what --timeout and --lease take and how tables show times") {
  CHECK(parse_duration("90s") == std::chrono::seconds(90));
  CHECK(parse_duration("30m") == std::chrono::minutes(30));
  CHECK(parse_duration("1h30m") == std::chrono::minutes(90));
  CHECK(parse_duration("500ms") == std::chrono::milliseconds(500));
  CHECK(parse_duration("45") == std::chrono::seconds(45));
  CHECK_FALSE(parse_duration("0s"));
  CHECK_FALSE(parse_duration("forever"));
  CHECK_FALSE(parse_duration("10y"));
  CHECK_FALSE(parse_duration(""));
  CHECK(relative_time("2026-01-01T00:00:00.000Z", kiln::parse_rfc3339("2026-01-01T00:03:00.000Z").value()) == "3m ago");
  CHECK(relative_time("2026-01-01T00:05:00.000Z", kiln::parse_rfc3339("2026-01-01T00:00:00.000Z").value()) == "in 5m");
  CHECK(relative_time("not a time", 0) == "not a time");
}
