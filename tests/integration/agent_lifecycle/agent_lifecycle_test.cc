// kilnd drives nodes on kiln-vbmc (the captured HGX H100 Redfish tree, and an
// IPMI BMC over libvirt's test driver) through the whole lifecycle with the
// node's work done by an agent (agent_harness.h).
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include "agent_lifecycle/agent_harness.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

TEST_CASE("a Redfish node through the agent: manage, inspect, provide, deploy, undeploy") {
  if (!fixtures_present()) {
    KILN_SKIP("skipping: " << kFixtures << " is absent");
  }
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  std::string img = os_bytes();
  register_images(c, dir.path(), img);
  const std::string mac = "52:54:00:a9:00:01";
  k.lease_to_loopback(mac);
  auto r = c.request("POST", "/v1/nodes", redfish_node("hgx", bmc.port(), mac).dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);
  std::string id = json::parse(r.body)["id"];
  AgentBehaviour os_reports;
  os_reports.os_addresses = {"fd00::77", "192.0.2.77"};
  TestAgent agent(k.port(), "hgx", mac, os_reports);

  put(c, "/v1/nodes/hgx/states/provision", {{"target", "manage"}});
  wait_stable(c, "hgx", "manageable");

  // In-band inspection: the agent's inventory, not the BMC's.
  put(c, "/v1/nodes/hgx/states/provision", {{"target", "inspect"}});
  json n = wait_stable(c, "hgx", "manageable");
  CHECK(text(n["last_error"]).empty());
  json inv = get(c, "/v1/nodes/hgx/inventory");
  CHECK(inv["cpu"]["model"] == "Test CPU");
  CHECK(n["power_state"] == "off");

  put(c, "/v1/nodes/hgx/states/provision", {{"target", "provide"}});
  n = wait_stable(c, "hgx", "available");
  CHECK(text(n["last_error"]).empty());

  // Deploy: an image that does not exist, or is not an os image, is refused before the node moves.
  for (const char* bad : {"no-such-image", "deploy-ramdisk"}) {
    auto d = c.request("PUT", "/v1/nodes/hgx/states/provision", json{{"target", "deploy"}, {"image", bad}}.dump(), auth());
    INFO(d.body);
    CHECK(d.status == 400);
    CHECK_THAT(d.body, Catch::Contains("/image"));
  }
  CHECK(get(c, "/v1/nodes/hgx")["provision_state"] == "available");

  put(c, "/v1/nodes/hgx/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  n = wait_stable(c, "hgx", "active");
  CHECK(text(n["last_error"]).empty());
  CHECK(agent.last_image_sha() == kiln::sha256_hex(img));
  std::string local = agent.local_boot_script();
  CHECK((local.find("sanboot") != std::string::npos || local.find("exit") != std::string::npos));
  CHECK(local.find("kiln.token") == std::string::npos);
  // The OS's agent reported its addresses: the node shows them, and the login
  // on the first IPv4 one with the image's user (demo-os: root by default).
  REQUIRE(wait_until([&] { return !get(c, "/v1/nodes/hgx")["addresses"].empty(); }, 20s));
  n = get(c, "/v1/nodes/hgx");
  CHECK(n["addresses"] == json({"fd00::77", "192.0.2.77"}));
  CHECK(n["ssh"] == "root@192.0.2.77");

  put(c, "/v1/nodes/hgx/states/provision", {{"target", "undeploy"}});
  n = wait_stable(c, "hgx", "available");
  CHECK(text(n["last_error"]).empty());
  // The addresses were that OS's: gone with it.
  CHECK(n["addresses"] == json::array());
  CHECK(n["ssh"].is_null());

  std::vector<std::string> want = {"inspect", "wipe", "write_image", "write_config_drive", "wipe"};
  CHECK(agent.commands() == want);
  // The config drive kilnd sent: an ISO 9660 volume labelled cidata (the
  // node has no allocation: no keys, its name as hostname).
  std::string iso = agent.config_drive();
  REQUIRE(iso.size() > 32768 + 72);
  CHECK(iso.substr(32769, 5) == "CD001");
  CHECK(iso.substr(32808, 6) == "cidata");
  CHECK(iso.find("local-hostname: \"hgx\"") != std::string::npos);
  auto types = event_types(c, id);
  for (const char* t : {"agent.lookup", "agent.command_sent", "agent.result", "agent.os_booted", "node.addresses"}) {
    INFO(t);
    CHECK(has(types, t));
  }
  // Burn-in and validation were skipped for want of a profile, and said so.
  json evs = get(c, "/v1/events?limit=1000&node=" + id);
  bool skipped = false;
  for (const auto& e : evs["events"])
    if (e["detail"].value("note", "") == "no profile: burn-in skipped") skipped = true;
  CHECK(skipped);
}

TEST_CASE("IPMI node failure paths: write_image error, silent agent, abort while waiting") {
  uint16_t ipmi_port = free_port(SOCK_DGRAM);
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--libvirt-uri",
                   "test:///default", "--ipmi-listen", "127.0.0.1:" + std::to_string(ipmi_port)});
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--timeout",
                              "deploying=6", "--timeout-check-ms", "200"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  register_images(c, dir.path(), os_bytes());
  const std::string mac = "52:54:00:a9:01:01";
  k.lease_to_loopback(mac);
  auto r = c.request("POST", "/v1/nodes", ipmi_node("ipmi", ipmi_port, mac).dump(), auth());
  INFO(r.body);
  REQUIRE(r.status == 201);

  {
    TestAgent agent(k.port(), "ipmi", mac, AgentBehaviour{.corrupt_image = "not the image"});
    to_available(c, "ipmi");
    put(c, "/v1/nodes/ipmi/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
    json n = wait_stable(c, "ipmi", "deploy_failed");
    INFO(n.dump());
    CHECK_THAT(text(n["last_error"]), Catch::StartsWith("write_image failed: sha256 mismatch: expected "));
  }

  // An agent that never calls back: the deadline fails the node at wait_agent.
  put(c, "/v1/nodes/ipmi/states/provision", {{"target", "manage"}});
  wait_stable(c, "ipmi", "manageable");
  {
    TestAgent agent(k.port(), "ipmi", mac);
    put(c, "/v1/nodes/ipmi/states/provision", {{"target", "provide"}});
    wait_stable(c, "ipmi", "available");
  }
  {
    TestAgent silent(k.port(), "ipmi", mac, AgentBehaviour{.silent = true});
    put(c, "/v1/nodes/ipmi/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
    json n = wait_stable(c, "ipmi", "deploy_failed", 30s);
    CHECK(text(n["last_error"]) == "timed out after 6s in deploying (step wait_agent)");
  }

  // Abort while waiting for the agent.
  put(c, "/v1/nodes/ipmi/states/provision", {{"target", "manage"}});
  wait_stable(c, "ipmi", "manageable");
  {
    TestAgent agent(k.port(), "ipmi", mac);
    put(c, "/v1/nodes/ipmi/states/provision", {{"target", "provide"}});
    wait_stable(c, "ipmi", "available");
  }
  put(c, "/v1/nodes/ipmi/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  wait_node(c, "ipmi", [](const json& n) { return n["provision_step"] == "wait_agent"; });
  put(c, "/v1/nodes/ipmi/states/provision", {{"target", "abort"}});
  json n = wait_stable(c, "ipmi", "deploy_failed", 10s);
  CHECK_THAT(text(n["last_error"]), Catch::Contains("(step wait_agent)"));
  // kilnd is not still waiting: nothing holds the node and the log says the operation ended.
  std::this_thread::sleep_for(1500ms);
  CHECK(is_free(get(c, "/v1/nodes/ipmi")));
}

TEST_CASE("kilnd killed while the agent works: resumed, and the agent keeps its session") {
  if (!fixtures_present()) {
    KILN_SKIP("skipping: " << kFixtures << " is absent");
  }
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  uint16_t port = free_port(SOCK_STREAM);
  std::vector<std::string> flags = {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--listen",
                                    "127.0.0.1:" + std::to_string(port)};
  auto k = std::make_unique<KilndProcess>(dir.path(), flags);
  k->start();
  HttpTestClient c("127.0.0.1", port);
  std::string img = os_bytes();
  register_images(c, dir.path(), img);
  const std::string mac = "52:54:00:a9:02:01";
  k->lease_to_loopback(mac);
  auto r = c.request("POST", "/v1/nodes", redfish_node("hgx", bmc.port(), mac).dump(), auth());
  REQUIRE(r.status == 201);
  std::string id = json::parse(r.body)["id"];
  TestAgent agent(port, "hgx", mac, AgentBehaviour{.write_delay = 3000ms});
  to_available(c, "hgx");

  put(c, "/v1/nodes/hgx/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  auto end = std::chrono::steady_clock::now() + 60s;
  while (!agent.busy_writing() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
  REQUIRE(agent.busy_writing());
  int before = agent.heartbeats_ok();
  k->kill9();
  k = std::make_unique<KilndProcess>(dir.path(), flags);
  k->start();
  HttpTestClient c2("127.0.0.1", port);
  json n = wait_stable(c2, "hgx", "active");
  CHECK(text(n["last_error"]).empty());
  CHECK(agent.heartbeats_ok() > before);     // the same session kept working after the restart
  CHECK(agent.stale_results() >= 1);         // the pre-restart write_image result was dropped (409)
  CHECK(agent.last_image_sha() == kiln::sha256_hex(img));
  CHECK(has(event_types(c2, id), "provision.resumed"));
}
