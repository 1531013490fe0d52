// Two kilnd on one PostgreSQL (issue 18), a Redfish node on kiln-vbmc and an
// agent that only ever reaches the other instance than the one the verbs go
// to: the boot script, lookup, heartbeats, results and the image download
// all go to B while the operations run on A (the agent protocol's state is
// in the database). Then A is killed with -9 while the agent writes the
// image: B takes the deploy over and finishes it with the same agent.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>

#include "agent_lifecycle/agent_harness.h"
#include "tests/support/postgres_server.h"
#include "tests/support/skip.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// This instance's conductor id, from its own GET /v1/conductors.
std::string self_id(HttpTestClient& c) {
  const json cs = get(c, "/v1/conductors");
  for (const auto& x : cs["conductors"])
    if (x["self"].get<bool>()) return x["id"];
  FAIL("no conductor says self");
  return "";
}

// The conductor an operation id names (`<conductor>/<uuid>`).
std::string runner(const json& node) {
  const std::string op = text(node["reservation"]);
  return op.substr(0, op.find('/'));
}

}  // namespace

TEST_CASE("two kilnd on one PostgreSQL: the agent reaches only B, A's operations finish, and B takes a deploy over after A is killed") {
  if (!fixtures_present()) KILN_SKIP("skipping: " << kFixtures << " is absent");
  if (auto missing = PostgresServer::missing_binaries()) KILN_SKIP("PostgreSQL not available: " << *missing);
  PostgresServer pg;
  pg.create_database("agents");
  TempDir shared;  // the key and the image directory every instance shares
  std::filesystem::create_directories(shared.path() + "/images");
  const std::vector<std::string> flags = {
      "--bootstrap-token", kToken, "--database", pg.url("agents"), "--key-file", shared.path() + "/kiln.key",
      "--image-dir", shared.path() + "/images", "--power-sync-interval", "0", "--heartbeat-interval-ms", "300",
      "--conductor-timeout-ms", "2000"};
  TempDir dir_a, dir_b;
  KilndProcess a(dir_a.path(), flags), b(dir_b.path(), flags);
  a.start();
  b.start();
  HttpTestClient ca("127.0.0.1", a.port()), cb("127.0.0.1", b.port());
  const std::string id_a = self_id(ca), id_b = self_id(cb);
  REQUIRE(id_a != id_b);

  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  const std::string img = os_bytes();
  register_images(ca, shared.path(), img);
  const std::string mac = "52:54:00:a9:18:01";
  auto r = ca.request("POST", "/v1/nodes", redfish_node("hgx", bmc.port(), mac).dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  AgentBehaviour slow_write;
  slow_write.write_delay = 3s;  // long enough to kill A mid-write below
  TestAgent agent(b.port(), "hgx", mac, slow_write);

  // Every operation taken through A runs on A, whoever owns the node: the
  // runners seen while polling through the flow are A's alone.
  std::set<std::string> runners;
  auto settle = [&](const std::string& state) {
    return wait_node(ca, "hgx", [&](const json& n) {
      if (!is_free(n)) runners.insert(runner(n));
      return n["provision_state"] == state && is_free(n);
    });
  };
  put(ca, "/v1/nodes/hgx/states/provision", {{"target", "manage"}});
  settle("manageable");
  put(ca, "/v1/nodes/hgx/states/provision", {{"target", "inspect"}});
  json n = settle("manageable");
  CHECK(text(n["last_error"]).empty());
  CHECK(get(cb, "/v1/nodes/hgx/inventory")["cpu"]["model"] == "Test CPU");  // the agent's, posted to B
  put(ca, "/v1/nodes/hgx/states/provision", {{"target", "provide"}});
  n = settle("available");
  CHECK(text(n["last_error"]).empty());
  put(ca, "/v1/nodes/hgx/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  n = settle("active");
  CHECK(text(n["last_error"]).empty());
  CHECK(agent.last_image_sha() == kiln::sha256_hex(img));  // the bytes came from B
  CHECK(runners == std::set<std::string>{id_a});
  CHECK(agent.heartbeats_ok() > 0);
  CHECK(agent.stale_results() == 0);
  std::vector<std::string> want = {"inspect", "wipe", "write_image", "write_config_drive"};
  CHECK(agent.commands() == want);

  // Again, and A dies while the agent writes the image.
  put(ca, "/v1/nodes/hgx/states/provision", {{"target", "undeploy"}});
  settle("available");
  put(ca, "/v1/nodes/hgx/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  REQUIRE(wait_until([&] { return agent.busy_writing(); }, 90s, 20ms));
  REQUIRE(runner(get(ca, "/v1/nodes/hgx")) == id_a);
  a.kill9();

  // B takes the deploy over (a wait state: resumed, not failed) and the same
  // agent's result, posted to B, finishes it.
  n = wait_node(cb, "hgx", [&](const json& m) { return m["provision_state"] == "active" && is_free(m); }, 60s);
  CHECK(text(n["last_error"]).empty());
  int resumed = 0;
  const json events = get(cb, "/v1/events?limit=1000&node=" + text(n["id"]));
  for (const auto& e : events["events"])
    if (e["type"] == "provision.resumed") {
      ++resumed;
      CHECK(runner(json{{"reservation", e["detail"].value("op", "")}}) == id_b);
      CHECK(e["detail"].value("previous_op", "").rfind(id_a + "/", 0) == 0);
      CHECK_THAT(e["detail"].value("cause", ""), Catch::Contains("conductor " + id_a));
    }
  CHECK(resumed == 1);
  CHECK(agent.last_image_sha() == kiln::sha256_hex(img));
  CHECK(n["conductor"] == id_b);
  // The resumed step sends its command again (write_image is idempotent), as
  // after a restart of a lone kilnd; the first write's result, if it came
  // after, was refused as stale.
  want = {"inspect", "wipe", "write_image", "write_config_drive", "wipe", "write_image", "write_image",
          "write_config_drive"};
  CHECK(agent.commands() == want);
}
