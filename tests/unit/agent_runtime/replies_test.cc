// The agent's readers of kilnd's replies: hostile or broken bodies read as
// absent fields, never as an exception or undefined behaviour.
#include <catch2/catch.hpp>

#include <chrono>
#include <limits>
#include <string>

#include "agent/runtime/replies.h"

using namespace kiln::agent;
using std::chrono::milliseconds;

TEST_CASE("lookup reply: session, node id and state, interval", "[replies]") {
  auto r = read_lookup_reply(
      R"({"session":"s1","node":{"id":"n1","provision_state":"cleaning"},"heartbeat_interval_s":1.5})");
  REQUIRE(r);
  CHECK(r->session == "s1");
  CHECK(r->node_id == "n1");
  CHECK(r->provision_state == "cleaning");
  REQUIRE(r->heartbeat_interval_s);
  CHECK(*r->heartbeat_interval_s == 1.5);
}

TEST_CASE("lookup reply: no session, a non-string session or not JSON is no reply", "[replies]") {
  CHECK_FALSE(read_lookup_reply(R"({"node":{"id":"n1"}})"));
  CHECK_FALSE(read_lookup_reply(R"({"session":7})"));
  CHECK_FALSE(read_lookup_reply(R"([1,2])"));
  CHECK_FALSE(read_lookup_reply("<html>502 Bad Gateway</html>"));
  CHECK_FALSE(read_lookup_reply(std::string(100, '[')));
}

TEST_CASE("lookup reply: wrongly typed node fields read as absent", "[replies]") {
  auto r = read_lookup_reply(R"({"session":"s","node":{"id":5,"provision_state":null},"heartbeat_interval_s":"x"})");
  REQUIRE(r);
  CHECK(r->node_id.empty());
  CHECK(r->provision_state.empty());
  CHECK_FALSE(r->heartbeat_interval_s);
  auto r2 = read_lookup_reply(R"({"session":"s","node":"n1"})");
  REQUIRE(r2);
  CHECK(r2->node_id.empty());
}

TEST_CASE("heartbeat reply: a command with id, name and args", "[replies]") {
  auto r = read_heartbeat_reply(R"({"command":{"id":"c1","name":"wipe","args":{"mode":"fast"}}})");
  REQUIRE(r);
  REQUIRE(r->command);
  CHECK(r->command->id == "c1");
  CHECK(r->command->name == "wipe");
  CHECK(r->command->args == nlohmann::json{{"mode", "fast"}});
}

TEST_CASE("heartbeat reply: a numeric command id (which used to throw) is no command", "[replies]") {
  auto r = read_heartbeat_reply(R"({"command":{"id":42,"name":"wipe"}})");
  REQUIRE(r);
  CHECK_FALSE(r->command);
  auto r2 = read_heartbeat_reply(R"({"command":{"id":"c2","name":["wipe"],"args":[1]}})");
  REQUIRE(r2);
  REQUIRE(r2->command);
  CHECK(r2->command->name.empty());
  CHECK(r2->command->args == nlohmann::json::object());
  CHECK_FALSE(read_heartbeat_reply("not json"));
}

TEST_CASE("interval clamp: NaN, infinities, huge and negative values stay within bounds", "[replies]") {
  const milliseconds lo(500), hi(30000);
  CHECK(clamp_interval(2.0, lo, hi) == milliseconds(2000));
  CHECK(clamp_interval(-1.0, lo, hi) == lo);
  CHECK(clamp_interval(0.0, lo, hi) == lo);
  CHECK(clamp_interval(1e300, lo, hi) == hi);
  CHECK(clamp_interval(std::numeric_limits<double>::infinity(), lo, hi) == hi);
  CHECK(clamp_interval(-std::numeric_limits<double>::infinity(), lo, hi) == lo);
  CHECK(clamp_interval(std::numeric_limits<double>::quiet_NaN(), lo, hi) == hi);
  // A JSON number past double's range parses as infinity in nlohmann: still bounded.
  auto r = read_heartbeat_reply(R"({"heartbeat_interval_s":1e400})");
  if (r && r->heartbeat_interval_s) CHECK(clamp_interval(*r->heartbeat_interval_s, lo, hi) == hi);
}

TEST_CASE("problem detail: detail, then title, then the body's start as valid UTF-8", "[replies]") {
  CHECK(problem_detail(R"({"title":"Conflict","detail":"node is busy"})") == "node is busy");
  CHECK(problem_detail(R"({"title":"Conflict","detail":3})") == "Conflict");
  CHECK(problem_detail(std::string(300, 'x')) == std::string(200, 'x'));
  std::string garbage = "\xff\xfe oops";
  CHECK(problem_detail(garbage).find('\xff') == std::string::npos);
}
