// Regression tests for a hostile machine on the provisioning network
// (docs/agent-protocol.md "Trust", docs/security.md): against a running
// kilnd, a stranger can neither take a deploying node's os-phase session
// without the deploy secret, nor mint or learn a node's boot token by
// fetching its boot script, nor tell a known MAC with nothing to boot from an
// unknown one. Another loopback address (127.0.0.2) stands in for the
// stranger's machine; nothing leaves loopback.
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include "agent_lifecycle/agent_harness.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

json lookup_body(const std::string& mac, const std::string& phase) {
  return {{"macs", {mac}}, {"phase", phase}, {"version", "stranger"}};
}

}  // namespace

TEST_CASE("trust: an os-phase lookup needs the deploy secret - a stranger gets 401 and leaves the real agent alone") {
  if (!fixtures_present()) KILN_SKIP("the Redfish fixtures are absent: " << kFixtures);
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  register_images(c, dir.path(), os_bytes());
  const std::string mac = "52:54:00:a9:10:01";
  k.lease_to_loopback(mac);
  auto r = c.request("POST", "/v1/nodes", redfish_node("victim", bmc.port(), mac).dump(), auth());
  REQUIRE(r.status == 201);
  // The node's own OS is played by the test: it gets the secret the ramdisk
  // left on the disk and looks up only when told to.
  std::mutex mu;
  std::string secret;
  std::atomic<bool> os_booted{false};
  AgentBehaviour b;
  b.os_boot = [&](const std::string& s) {
    std::lock_guard<std::mutex> l(mu);
    secret = s;
    os_booted = true;
  };
  TestAgent agent(k.port(), "victim", mac, b);
  to_available(c, "victim");
  put(c, "/v1/nodes/victim/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  wait_node(c, "victim", [](const json& n) { return n["provision_step"] == "wait_boot"; });
  for (int i = 0; i < 100 && !os_booted; ++i) std::this_thread::sleep_for(50ms);
  REQUIRE(os_booted);
  std::string real_secret;
  {
    std::lock_guard<std::mutex> l(mu);
    real_secret = secret;
  }
  REQUIRE(real_secret.size() == 64);  // write_image carried it

  // The stranger: no secret, an empty one, a wrong one. Each is 401 and says
  // nothing about the node's state.
  HttpTestClient stranger("127.0.0.1", k.port());
  stranger.set_source("127.0.0.2");
  json body = lookup_body(mac, "os");
  auto s1 = stranger.request("POST", "/v1/agent/lookup", body.dump());
  INFO(s1.body);
  CHECK(s1.status == 401);
  CHECK(s1.body.find("deploying") == std::string::npos);
  body["secret"] = "";
  CHECK(stranger.request("POST", "/v1/agent/lookup", body.dump()).status == 401);
  body["secret"] = std::string(64, '0');
  CHECK(stranger.request("POST", "/v1/agent/lookup", body.dump()).status == 401);
  body["secret"] = 7;
  auto typed = stranger.request("POST", "/v1/agent/lookup", body.dump());
  CHECK(typed.status == 400);
  CHECK_THAT(typed.body, Catch::Contains("/secret"));
  CHECK(get(c, "/v1/nodes/victim")["provision_step"] == "wait_boot");  // not "booted" by the stranger

  // The node's own OS agent, with the secret: the OS-booted signal.
  json real = lookup_body(mac, "os");
  real["secret"] = real_secret;
  auto ok = c.request("POST", "/v1/agent/lookup", real.dump());
  INFO(ok.body);
  REQUIRE(ok.status == 200);
  std::string session = json::parse(ok.body)["session"];
  // Another stranger attempt does not replace the real session.
  body.erase("secret");
  CHECK(stranger.request("POST", "/v1/agent/lookup", body.dump()).status == 401);
  json n = wait_stable(c, "victim", "active");
  CHECK(text(n["last_error"]).empty());

  // The secret is the deploy's: after undeploy and a new deploy it is worthless.
  put(c, "/v1/nodes/victim/states/provision", {{"target", "undeploy"}});
  wait_stable(c, "victim", "available");
  os_booted = false;
  put(c, "/v1/nodes/victim/states/provision", {{"target", "deploy"}, {"image", "demo-os"}});
  wait_node(c, "victim", [](const json& x) { return x["provision_step"] == "wait_boot"; });
  for (int i = 0; i < 100 && !os_booted; ++i) std::this_thread::sleep_for(50ms);
  REQUIRE(os_booted);
  auto old = stranger.request("POST", "/v1/agent/lookup", real.dump());  // the former tenant's copy
  CHECK(old.status == 401);
  {
    std::lock_guard<std::mutex> l(mu);
    CHECK(secret != real_secret);
    real["secret"] = secret;
  }
  CHECK(c.request("POST", "/v1/agent/lookup", real.dump()).status == 200);
  wait_stable(c, "victim", "active");
}

TEST_CASE("trust: boot scripts are bound to the DHCP lease, show one token per boot attempt, and say nothing to others") {
  if (!fixtures_present()) KILN_SKIP("the Redfish fixtures are absent: " << kFixtures);
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  const std::string leases = dir.path() + "/leases";
  const std::string mac = "52:54:00:a9:10:02";
  // dnsmasq's lease file: the node (this test, from 127.0.0.1) holds the lease.
  write_file(leases, "0 " + mac + " 127.0.0.1 node *\n");
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--dhcp-leases", leases});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  register_images(c, dir.path(), os_bytes());
  auto r = c.request("POST", "/v1/nodes", redfish_node("bound", bmc.port(), mac).dump(), auth());
  REQUIRE(r.status == 201);
  const std::string script = "/boot/" + mac + ".ipxe";
  HttpTestClient stranger("127.0.0.1", k.port());
  stranger.set_source("127.0.0.2");

  // Nothing to boot (enroll): the node's own answer names nothing.
  auto idle = c.request("GET", script);
  REQUIRE(idle.status == 200);
  CHECK(idle.body.find("bound") == std::string::npos);
  CHECK(idle.body.find("enroll") == std::string::npos);

  // A silent node waiting for its ramdisk agent (inspection).
  AgentBehaviour silent;
  silent.silent = true;
  TestAgent agent(k.port(), "bound", mac, silent);
  put(c, "/v1/nodes/bound/states/provision", {{"target", "manage"}});
  wait_stable(c, "bound", "manageable");
  put(c, "/v1/nodes/bound/states/provision", {{"target", "inspect"}});
  json n = wait_node(c, "bound", [](const json& x) { return x["provision_step"] == "wait_agent"; });

  // The stranger asks for the node's script: the same answer as for a node
  // with nothing to boot, no token, and the node's token is not replaced.
  auto theirs = stranger.request("GET", script);
  REQUIRE(theirs.status == 200);
  CHECK(theirs.body == idle.body);
  CHECK(theirs.body.find("kiln.token") == std::string::npos);

  auto s1 = c.request("GET", script);
  std::string t1 = script_arg(s1.body, "kiln.token");
  REQUIRE(t1.size() == 64);
  CHECK(stranger.request("GET", script).body == idle.body);
  auto s2 = c.request("GET", script);
  CHECK(script_arg(s2.body, "kiln.token") == t1);  // the attempt's token again, not a new one
  CHECK(s2.body == s1.body);

  // The token still works for the node (one-time).
  json body = {{"macs", {mac}}, {"node", text(n["id"])}, {"token", t1}, {"phase", "ramdisk"}, {"version", "t"}};
  auto look = c.request("POST", "/v1/agent/lookup", body.dump());
  INFO(look.body);
  CHECK(look.status == 200);
  CHECK(c.request("POST", "/v1/agent/lookup", body.dump()).status == 401);
  // A stranger with a wrong token learns nothing about the state either.
  body["token"] = std::string(64, '1');
  auto wrong = stranger.request("POST", "/v1/agent/lookup", body.dump());
  CHECK(wrong.status == 401);
  CHECK(wrong.body.find("inspecting") == std::string::npos);

  // An unknown MAC gets the very same bytes: remove the node's port and ask again.
  put(c, "/v1/nodes/bound/states/provision", {{"target", "abort"}});
  wait_node(c, "bound", [](const json& x) { return x["provision_state"] != "inspecting" && is_free(x); });
  json ports = get(c, "/v1/ports?node=" + text(n["id"]));
  REQUIRE(ports["ports"].size() == 1);
  auto del = c.request("DELETE", "/v1/ports/" + text(ports["ports"][0]["id"]), "", auth());
  INFO(del.body);
  REQUIRE(del.status / 100 == 2);
  CHECK(c.request("GET", script).body == idle.body);
  CHECK(stranger.request("GET", script).body == idle.body);
  CHECK(stranger.request("GET", "/boot/52:54:00:a9:10:99.ipxe").status == 200);
}

TEST_CASE("trust: a kilnd with no lease file to bind to refuses per-MAC boot scripts (404) and says how to bind") {
  if (!fixtures_present()) KILN_SKIP("the Redfish fixtures are absent: " << kFixtures);
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  const std::string mac = "52:54:00:a9:10:03";
  // The default: no --pxe-interface, no --dhcp-leases (the flag is given only
  // so that the test harness does not configure a lease file of its own).
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--lease-binding", "auto"});
  k.start();
  CHECK(k.log().find("per-MAC boot scripts and NoCloud seeds are refused") != std::string::npos);
  CHECK(k.log().find("--dhcp-leases FILE") != std::string::npos);
  HttpTestClient c("127.0.0.1", k.port());
  register_images(c, dir.path(), os_bytes());
  auto r = c.request("POST", "/v1/nodes", redfish_node("unbound", bmc.port(), mac).dump(), auth());
  REQUIRE(r.status == 201);
  put(c, "/v1/nodes/unbound/states/provision", {{"target", "manage"}});
  wait_stable(c, "unbound", "manageable");
  put(c, "/v1/nodes/unbound/states/provision", {{"target", "inspect"}});
  wait_node(c, "unbound", [](const json& x) { return x["provision_step"] == "wait_agent"; });

  // The node waits for its ramdisk agent, whose script would carry a boot
  // token: with nothing to bind the caller to, nobody gets it.
  auto script = c.request("GET", "/boot/" + mac + ".ipxe");
  CHECK(script.status == 404);
  CHECK(script.body.find("kiln.token") == std::string::npos);
  CHECK(c.request("GET", "/boot/boot.ipxe").status == 200);  // the generic chain names no node
  put(c, "/v1/nodes/unbound/states/provision", {{"target", "abort"}});
}

TEST_CASE("trust: --lease-binding off serves per-MAC boot scripts to anyone, with a warning that it is lab-only") {
  if (!fixtures_present()) KILN_SKIP("the Redfish fixtures are absent: " << kFixtures);
  VbmcProcess bmc({"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword, "--mockup",
                   kFixtures + "/supermicro-hgx-h100"});
  TempDir dir;
  const std::string mac = "52:54:00:a9:10:04";
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0", "--lease-binding", "off"});
  k.start();
  CHECK(k.log().find("lease binding is off") != std::string::npos);
  CHECK(k.log().find("lab only") != std::string::npos);
  HttpTestClient c("127.0.0.1", k.port());
  register_images(c, dir.path(), os_bytes());
  auto r = c.request("POST", "/v1/nodes", redfish_node("open", bmc.port(), mac).dump(), auth());
  REQUIRE(r.status == 201);
  put(c, "/v1/nodes/open/states/provision", {{"target", "manage"}});
  wait_stable(c, "open", "manageable");
  put(c, "/v1/nodes/open/states/provision", {{"target", "inspect"}});
  wait_node(c, "open", [](const json& x) { return x["provision_step"] == "wait_agent"; });
  HttpTestClient stranger("127.0.0.1", k.port());
  stranger.set_source("127.0.0.2");
  auto script = stranger.request("GET", "/boot/" + mac + ".ipxe");
  CHECK(script.status == 200);
  CHECK(script_arg(script.body, "kiln.token").size() == 64);
  put(c, "/v1/nodes/open/states/provision", {{"target", "abort"}});
}
