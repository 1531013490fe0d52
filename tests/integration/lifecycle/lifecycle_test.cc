// kilnd drives kiln-vbmc's Redfish exactly as it would drive a GPU server's
// BMC: manage verifies credentials (a wrong password sends the node back to
// enroll with the BMC's words), inspect reads the out-of-band inventory of a
// captured HGX H100 tree, power verbs change the BMC's state (checked by an
// independent HTTPS client), and power sync faults a BMC that stops answering
// and clears the fault when it comes back.
#include <catch2/catch.hpp>
#include "tests/support/skip.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <thread>

#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "kilnd/kilnd_process.h"
#include "redfish/vbmc_process.h"
#include "tests/support/http_test_client.h"
#include "tests/support/wait_until.h"

using namespace kiln::testing;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {
const std::string kToken = "kiln_lifecycle_admin_token_0001";
const std::string kUser = "admin";
const std::string kPassword = "s3cret";
const std::string kFixtures = KILN_REDFISH_FIXTURES;

Headers auth() { return {{"Authorization", "Bearer " + kToken}}; }
std::string text(const json& v) { return v.is_string() ? v.get<std::string>() : std::string(); }
bool is_free(const json& n) { return n["reservation"].is_null() || n["reservation"] == ""; }

bool fixtures_present() {
  struct stat st {};
  return ::stat(kFixtures.c_str(), &st) == 0;
}

std::vector<std::string> vbmc_args(std::vector<std::string> extra, const std::string& listen = "127.0.0.1:0") {
  std::vector<std::string> a = {"--redfish-listen", listen, "--user", kUser, "--password", kPassword};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

json get(HttpTestClient& c, const std::string& target) {
  auto r = c.request("GET", target, "", auth());
  INFO(target << " -> " << r.body);
  REQUIRE(r.status == 200);
  return json::parse(r.body);
}

void put(HttpTestClient& c, const std::string& target, const json& body) {
  auto r = c.request("PUT", target, body.dump(), auth());
  INFO(target << " -> " << r.body);
  REQUIRE(r.status == 202);
}

// Waits until `pred(node)` holds; returns the node.
template <typename Pred>
json wait_node(HttpTestClient& c, const std::string& name, Pred pred, std::chrono::milliseconds limit = 60s) {
  json n;
  if (kiln::testing::wait_until([&] { return pred(n = get(c, "/v1/nodes/" + name)); }, limit, 50ms)) return n;
  FAIL("node " << name << " never reached the expected condition: " << n.dump());
  return n;
}

json wait_stable(HttpTestClient& c, const std::string& name, const std::string& state) {
  return wait_node(c, name, [&](const json& n) { return n["provision_state"] == state && is_free(n); });
}

json redfish_node(const std::string& name, uint16_t port, const std::string& password) {
  return {{"name", name},
          {"bmc",
           {{"driver", "redfish"},
            {"address", "https://127.0.0.1:" + std::to_string(port)},
            {"username", kUser},
            {"password", password},
            {"verify_tls", false},
            {"options", {{"request_timeout_s", 5}, {"power_timeout_s", 20}}}}}};
}

// A UDP port free right now on 127.0.0.1 (for kiln-vbmc's --ipmi-listen).
uint16_t free_udp_port() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// ipmitool (an independent implementation) asking the BMC for its power state.
std::string ipmitool_power(uint16_t port) {
  std::string cmd = "ipmitool -I lanplus -C 3 -H 127.0.0.1 -p " + std::to_string(port) + " -U " + kUser +
                    " -P " + kPassword + " chassis power status 2>&1";
  std::string out;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, f)) out += buf;
    ::pclose(f);
  }
  return out;
}

// The BMC's view, read with a plain HTTPS client: PowerState of every system.
std::vector<std::string> bmc_power_states(uint16_t port) {
  HttpTestClient c("127.0.0.1", port, true);
  Headers h = {{"Authorization", "Basic " + kiln::base64_encode(kUser + ":" + kPassword)}};
  auto systems = json::parse(c.request("GET", "/redfish/v1/Systems", "", h).body);
  std::vector<std::string> out;
  for (const auto& m : systems["Members"]) {
    auto s = json::parse(c.request("GET", m["@odata.id"].get<std::string>(), "", h).body);
    out.push_back(s.value("PowerState", ""));
  }
  return out;
}
}  // namespace

TEST_CASE("manage verifies Redfish credentials, inspect reads the HGX H100 inventory, power verbs reach the BMC") {
  if (!fixtures_present()) {
    KILN_SKIP("skipping: " << kFixtures << " is absent (shared/ fixtures not checked out)");
  }
  VbmcProcess bmc(vbmc_args({"--mockup", kFixtures + "/supermicro-hgx-h100"}));
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());

  // Wrong password: back to enroll, with the reason.
  REQUIRE(c.request("POST", "/v1/nodes", redfish_node("hgx", bmc.port(), "wrong-password").dump(), auth()).status == 201);
  put(c, "/v1/nodes/hgx/states/provision", {{"target", "manage"}});
  json n = wait_stable(c, "hgx", "enroll");
  INFO(n.dump());
  CHECK_FALSE(text(n["last_error"]).empty());

  // The right password: verified, power state read from the BMC.
  auto r = c.request("PATCH", "/v1/nodes/hgx", json{{"bmc", {{"password", kPassword}}}}.dump(),
                     {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/merge-patch+json"}});
  REQUIRE(r.status == 200);
  put(c, "/v1/nodes/hgx/states/provision", {{"target", "manage"}});
  n = wait_stable(c, "hgx", "manageable");
  CHECK(text(n["last_error"]).empty());
  CHECK(n["power_state"] != "unknown");

  // Out-of-band inspection: the 8 H100s and the host's MAC.
  put(c, "/v1/nodes/hgx/states/provision", {{"target", "inspect"}});
  wait_stable(c, "hgx", "manageable");
  json inv = get(c, "/v1/nodes/hgx/inventory");
  REQUIRE(inv["gpus"].is_array());
  CHECK(inv["gpus"].size() == 8);
  CHECK_THAT(inv.dump(), Catch::Contains("94:6d:ae:91:fb:22"));

  // Power verbs: kilnd's record and the BMC's own state agree.
  put(c, "/v1/nodes/hgx/states/power", {{"target", "off"}});
  n = wait_node(c, "hgx", [](const json& x) { return x["target_power_state"].is_null() && is_free(x); });
  CHECK(n["power_state"] == "off");
  auto states = bmc_power_states(bmc.port());
  CHECK(std::find(states.begin(), states.end(), "Off") != states.end());
  put(c, "/v1/nodes/hgx/states/power", {{"target", "on"}});
  n = wait_node(c, "hgx", [](const json& x) { return x["target_power_state"].is_null() && is_free(x); });
  CHECK(n["power_state"] == "on");
  states = bmc_power_states(bmc.port());
  CHECK(std::find(states.begin(), states.end(), "On") != states.end());
}

TEST_CASE("inspecting a DGX H100 through kilnd: 8 GPUs in the inventory, the counts in the transition event") {
  VbmcProcess bmc(vbmc_args({"--mockup", std::string(KILN_REPO_REDFISH_FIXTURES) + "/nvidia-dgx-h100"}));
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  REQUIRE(c.request("POST", "/v1/nodes", redfish_node("dgx", bmc.port(), kPassword).dump(), auth()).status == 201);
  put(c, "/v1/nodes/dgx/states/provision", {{"target", "manage"}});
  wait_stable(c, "dgx", "manageable");
  put(c, "/v1/nodes/dgx/states/provision", {{"target", "inspect"}});
  json n = wait_stable(c, "dgx", "manageable");
  INFO(n.dump());
  CHECK(text(n["last_error"]).empty());
  json inv = get(c, "/v1/nodes/dgx/inventory");
  REQUIRE(inv["gpus"].is_array());
  CHECK(inv["gpus"].size() == 8);
  CHECK(inv["system"]["redfish_uri"] == "/redfish/v1/Systems/DGX");  // never the baseboard

  json counts;
  json evs = get(c, "/v1/events?limit=1000");
  for (const auto& e : evs["events"]) {
    if (e["type"] == "provision.transition" && e["detail"].contains("inventory_counts")) counts = e["detail"]["inventory_counts"];
  }
  INFO(evs.dump());
  REQUIRE(counts.is_object());
  CHECK(counts["gpus"] == 8);
  CHECK(counts["gpu_models"] == json({{"H100 80GB HBM3", 8}}));
  CHECK(counts["cpus"] == 2);
}

TEST_CASE("power sync: a BMC that stops answering faults its node, and the fault clears when it answers again") {
  auto vbmc = std::make_unique<VbmcProcess>(vbmc_args({"--libvirt-uri", "test:///default"}));
  uint16_t port = vbmc->port();
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "1",
                              "--power-sync-max-failures", "2"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  REQUIRE(c.request("POST", "/v1/nodes", redfish_node("vm", port, kPassword).dump(), auth()).status == 201);
  put(c, "/v1/nodes/vm/states/provision", {{"target", "manage"}});
  wait_stable(c, "vm", "manageable");

  vbmc.reset();  // the BMC goes away
  json n = wait_node(c, "vm", [](const json& x) { return x["fault"] == "power_failure"; });
  CHECK(n["maintenance"] == true);
  CHECK_THAT(text(n["maintenance_reason"]), Catch::StartsWith("power sync: "));

  // It comes back on the same address: the fault and the automatic maintenance clear.
  vbmc = std::make_unique<VbmcProcess>(vbmc_args({"--libvirt-uri", "test:///default"}, "127.0.0.1:" + std::to_string(port)));
  n = wait_node(c, "vm", [](const json& x) { return x["fault"].is_null() || x["fault"] == ""; });
  CHECK(n["maintenance"] == false);
  bool fault_event = false, cleared_event = false;
  json evs = get(c, "/v1/events?limit=1000");
  for (const auto& e : evs["events"]) {
    fault_event |= e["type"] == "node.fault";
    cleared_event |= e["type"] == "node.fault_cleared";
  }
  CHECK(fault_event);
  CHECK(cleared_event);
}

TEST_CASE("an IPMI node: manage verifies over RMCP+, power verbs reach the BMC as ipmitool sees it") {
  if (std::system("command -v ipmitool >/dev/null 2>&1") != 0) {
    KILN_SKIP("skipping: ipmitool is not installed");
  }
  uint16_t ipmi_port = free_udp_port();
  VbmcProcess bmc(vbmc_args({"--libvirt-uri", "test:///default", "--ipmi-listen",
                             "127.0.0.1:" + std::to_string(ipmi_port)}));
  TempDir dir;
  KilndProcess k(dir.path(), {"--bootstrap-token", kToken, "--power-sync-interval", "0"});
  k.start();
  HttpTestClient c("127.0.0.1", k.port());
  json body = {{"name", "ipmi-node"},
               {"bmc",
                {{"driver", "ipmi"},
                 {"address", "127.0.0.1:" + std::to_string(ipmi_port)},
                 {"username", kUser},
                 {"password", "not-the-password"}}}};
  REQUIRE(c.request("POST", "/v1/nodes", body.dump(), auth()).status == 201);

  // Wrong password: RAKP fails, back to enroll with the reason.
  put(c, "/v1/nodes/ipmi-node/states/provision", {{"target", "manage"}});
  json n = wait_stable(c, "ipmi-node", "enroll");
  CHECK_THAT(text(n["last_error"]), Catch::Contains("wrong password"));

  auto r = c.request("PATCH", "/v1/nodes/ipmi-node", json{{"bmc", {{"password", kPassword}}}}.dump(),
                     {{"Authorization", "Bearer " + kToken}, {"Content-Type", "application/merge-patch+json"}});
  REQUIRE(r.status == 200);
  put(c, "/v1/nodes/ipmi-node/states/provision", {{"target", "manage"}});
  wait_stable(c, "ipmi-node", "manageable");

  for (const char* target : {"off", "on"}) {
    put(c, "/v1/nodes/ipmi-node/states/power", {{"target", target}});
    n = wait_node(c, "ipmi-node", [](const json& x) { return x["target_power_state"].is_null() && is_free(x); });
    INFO(n.dump());
    CHECK(n["power_state"] == target);
    CHECK(text(n["last_error"]).empty());
    CHECK_THAT(ipmitool_power(ipmi_port), Catch::Contains(std::string("Chassis Power is ") + target));
  }
}
