// Two kilnd on one PostgreSQL (docs/scale-out.md), a Redfish node on kiln-vbmc, and
// an agent and an operator that only ever reach the instance that does not
// own the node (N): the verbs are taken there and handed to the owner (O),
// which runs the flows, while the boot script, lookup, heartbeats, results
// and the image download all go to N (the agent protocol's state is in the
// database). Then O is killed with -9 while the agent writes the image: N
// takes the deploy over and finishes it with the same agent.
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

TEST_CASE("two kilnd on one PostgreSQL: verbs and the agent reach only the non-owner, the owner runs the flows, and a deploy is taken over after the owner is killed") {
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
  // Both views list both alive, so both answer the same owner below.
  auto alive = [&](HttpTestClient& c) {
    int k = 0;
    const json cs = get(c, "/v1/conductors");
    for (const auto& x : cs["conductors"]) k += x["alive"].get<bool>() ? 1 : 0;
    return k;
  };
  REQUIRE(wait_until([&] { return alive(ca) == 2 && alive(cb) == 2; }, 10s));

  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  const std::string img = os_bytes();
  register_images(ca, shared.path(), img);
  const std::string mac = "52:54:00:a9:18:01";
  a.lease_to_loopback(mac);
  b.lease_to_loopback(mac);
  auto r = ca.request("POST", "/v1/nodes", redfish_node("hgx", bmc.port(), mac).dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  // O owns the node; N is the other. Both answer the same owner.
  const std::string owner = text(get(ca, "/v1/nodes/hgx")["conductor"]);
  REQUIRE(text(get(cb, "/v1/nodes/hgx")["conductor"]) == owner);
  REQUIRE((owner == id_a || owner == id_b));
  KilndProcess& o = owner == id_a ? a : b;
  HttpTestClient& cn = owner == id_a ? cb : ca;
  const std::string id_n = owner == id_a ? id_b : id_a;
  const uint16_t n_port = owner == id_a ? b.port() : a.port();
  AgentBehaviour slow_write;
  slow_write.write_delay = 3s;  // long enough to kill O mid-write below
  TestAgent agent(n_port, "hgx", mac, slow_write);

  // Every operation, taken by N, runs on O: the runners seen while polling
  // through the flow are O's alone.
  std::set<std::string> runners;
  auto settle = [&](const std::string& state) {
    return wait_node(cn, "hgx", [&](const json& n) {
      if (!is_free(n)) runners.insert(runner(n));
      return n["provision_state"] == state && is_free(n);
    });
  };
  put(cn, "/v1/nodes/hgx/states/provision", {{"target", "manage"}});
  settle("manageable");
  put(cn, "/v1/nodes/hgx/states/provision", {{"target", "inspect"}});
  json n = settle("manageable");
  CHECK(text(n["last_error"]).empty());
  CHECK(get(cn, "/v1/nodes/hgx/inventory")["cpu"]["model"] == "Test CPU");  // the agent's, posted to N
  put(cn, "/v1/nodes/hgx/states/provision", {{"target", "provide"}});
  n = settle("available");
  CHECK(text(n["last_error"]).empty());
  put(cn, "/v1/nodes/hgx/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  n = settle("active");
  CHECK(text(n["last_error"]).empty());
  CHECK(agent.last_image_sha() == kiln::sha256_hex(img));  // the bytes came from N
  CHECK(runners == std::set<std::string>{owner});
  CHECK(agent.heartbeats_ok() > 0);
  CHECK(agent.stale_results() == 0);
  std::vector<std::string> want = {"inspect", "wipe", "write_image", "write_config_drive"};
  CHECK(agent.commands() == want);

  // Again, and O dies while the agent writes the image.
  put(cn, "/v1/nodes/hgx/states/provision", {{"target", "undeploy"}});
  settle("available");
  put(cn, "/v1/nodes/hgx/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  REQUIRE(wait_until([&] { return agent.busy_writing(); }, 90s, 20ms));
  REQUIRE(runner(get(cn, "/v1/nodes/hgx")) == owner);
  o.kill9();

  // N takes the deploy over (a wait state: resumed, not failed) and the same
  // agent's result, posted to N, finishes it.
  n = wait_node(cn, "hgx", [&](const json& m) { return m["provision_state"] == "active" && is_free(m); }, 60s);
  CHECK(text(n["last_error"]).empty());
  int resumed = 0;
  const json events = get(cn, "/v1/events?limit=1000&node=" + text(n["id"]));
  for (const auto& e : events["events"])
    if (e["type"] == "provision.resumed") {
      ++resumed;
      CHECK(runner(json{{"reservation", e["detail"].value("op", "")}}) == id_n);
      CHECK(e["detail"].value("previous_op", "").rfind(owner + "/", 0) == 0);
      CHECK_THAT(e["detail"].value("cause", ""), Catch::Contains("conductor " + owner));
    }
  CHECK(resumed == 1);
  CHECK(agent.last_image_sha() == kiln::sha256_hex(img));
  CHECK(n["conductor"] == id_n);
  // The resumed step sends its command again (write_image is idempotent), as
  // after a restart of a lone kilnd; the first write's result, if it came
  // after, was refused as stale.
  want = {"inspect", "wipe", "write_image", "write_config_drive", "wipe", "write_image", "write_image",
          "write_config_drive"};
  CHECK(agent.commands() == want);
}
