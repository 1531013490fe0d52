// BodyParser: small bodies parsed where they arrive, large ones on the
// parser's thread, the caller resumed on its own thread either way.

#include <utility>  // before Asio

#include <optional>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "drivers/redfish/body_parser.h"

namespace {

using kiln::redfish::BodyParser;
using nlohmann::json;
namespace asio = boost::asio;

struct Parsed {
  json value;
  std::thread::id resumed_on;
};

// Parses `body` from a coroutine on an io_context this thread runs.
Parsed parse_here(BodyParser& parser, std::string body) {
  asio::io_context io;
  auto f = asio::co_spawn(
      io,
      [&parser, body = std::move(body)]() mutable -> asio::awaitable<Parsed> {
        json v = co_await parser.parse(std::move(body));
        co_return Parsed{std::move(v), std::this_thread::get_id()};
      },
      asio::use_future);
  io.run();
  return f.get();
}

std::string members_body(std::size_t count) {
  json members = json::array();
  for (std::size_t i = 0; i < count; ++i) {
    members.push_back({{"@odata.id", "/redfish/v1/Chassis/1/Sensors/" + std::to_string(i)}, {"Reading", i}});
  }
  return json{{"Members", members}}.dump();
}

}  // namespace

TEST_CASE("body parser: a body under the limit is parsed inline, one at or over it on the parser's thread",
          "[redfish][body_parser]") {
  BodyParser parser(1024);
  const std::string small = R"({"PowerState":"On"})";
  const std::string large = members_body(100);
  REQUIRE(large.size() >= 1024);

  Parsed s = parse_here(parser, small);
  CHECK(s.value["PowerState"] == "On");
  CHECK(parser.parsed_off_thread() == 0);

  Parsed l = parse_here(parser, large);
  CHECK(l.value["Members"].size() == 100);
  CHECK(l.value["Members"][99]["Reading"] == 99);
  CHECK(parser.parsed_off_thread() == 1);
  // The caller goes on where it was, not on the parser's thread.
  CHECK(l.resumed_on == std::this_thread::get_id());
}

TEST_CASE("body parser: empty, malformed and too deep bodies read as null on both paths",
          "[redfish][body_parser]") {
  BodyParser parser(16);
  CHECK(parse_here(parser, "").value.is_null());
  CHECK(parse_here(parser, "{").value.is_null());
  CHECK(parse_here(parser, std::string(2000, '[') + std::string(2000, ']')).value.is_null());
  CHECK(parse_here(parser, R"({"a": "unterminated)").value.is_null());
  CHECK(parser.parsed_off_thread() == 2);
}

TEST_CASE("body parser: named members are the only ones built, on both paths", "[redfish][body_parser]") {
  BodyParser parser(1024);
  static constexpr std::string_view kMembers[] = {"PowerState"};
  json small = {{"PowerState", "Off"}, {"Boot", {{"x", 1}}}};
  json large = json::parse(members_body(100));
  large["PowerState"] = "On";
  REQUIRE(large.dump().size() >= 1024);
  auto parse_members = [&](const json& body) {
    asio::io_context io;
    auto f = asio::co_spawn(
        io, [&]() -> asio::awaitable<json> { co_return co_await parser.parse(body.dump(), kMembers); },
        asio::use_future);
    io.run();
    return f.get();
  };
  CHECK(parse_members(small) == json{{"PowerState", "Off"}});
  CHECK(parse_members(large) == json{{"PowerState", "On"}});
  CHECK(parser.parsed_off_thread() == 1);
}
