// A deployed node's addresses learned from kilnd's DHCP leases (an OS with
// no kiln-agent reports none): a real lease file written as dnsmasq writes
// it, LeaseAddressLearner sweeping it into the real SQLite store, and what
// tenants and staff then see through Api::handle() (node, node list,
// allocation members), with the real conductor and allocation engine
// driving fake-driver nodes (api_harness.h).
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "common/ids.h"
#include "controller/agent/lease_address_learner.h"
#include "controller/api/profile_input.h"
#include "tests/support/wait_until.h"
#include "tests/unit/api/api_harness.h"
#include "tests/unit/api/tenant_fixtures.h"

using namespace kiln;
using namespace kiln::test;
using json = nlohmann::json;
using V = http::bhttp::verb;

namespace {

// The default profiles and a ready public image "cloud" whose login is "debian".
void seed_cloud(ApiHarness& h) {
  seed_profiles(h);
  add_ready_image(h, "cloud", true, "debian");
}

// The learner as kilnd runs it, over a lease file of the test's.
struct Leases {
  explicit Leases(ApiHarness& h)
      : path(std::filesystem::temp_directory_path() / ("kiln-leases-" + new_uuid())),
        pool(1),
        learner(h.io(), h.store(), h.store(), pool, clock, path.string(), LeaseAddressLearnerOptions{},
                Logger(LogLevel::kOff)) {
    std::ofstream(path).flush();
  }
  ~Leases() {
    pool.stop();
    std::filesystem::remove(path);
  }
  // A line as dnsmasq writes it: <expiry> <mac> <ip> <hostname> <client-id>.
  void add(int64_t expiry, const std::string& mac, const std::string& ip) {
    std::ofstream(path, std::ios::app) << expiry << " " << mac << " " << ip << " debian *\n";
  }
  std::filesystem::path path;
  SystemClock clock;
  BlockingPool pool;
  LeaseAddressLearner learner;
};

int64_t in_an_hour() { return SystemClock().now_ms() / 1000 + 3600; }

}  // namespace

TEST_CASE("dhcp addresses: a deployed node shows its own current lease to its tenant, and loses it at release",
          "[dhcp-addresses]") {
  ApiHarness h;
  seed_cloud(h);
  make_tenant(h, "acme");
  make_tenant(h, "globex");
  const std::string acme = h.make_token("tenant", "acme", "acme");
  const std::string globex = h.make_token("tenant", "globex", "globex");
  const std::string mine = available_node(h, "n1", json::object(), "52:54:00:d4:00:01");
  const std::string spare = available_node(h, "n2", json::object(), "52:54:00:d4:00:02");
  Leases leases(h);

  // The spare node's lease, and the deploy ramdisk's lease of n1's MAC,
  // are there before anything is deployed: nothing shows.
  leases.add(in_an_hour(), "52:54:00:d4:00:02", "10.77.0.51");
  leases.add(0, "52:54:00:d4:00:09", "10.77.0.59");  // a machine Kiln does not know
  leases.add(in_an_hour(), "52:54:00:d4:00:01", "10.77.0.50");
  REQUIRE(h.sync(leases.learner.sweep()));
  CHECK(h.call(V::get, "/v1/nodes/" + mine, h.admin()).json["addresses"].empty());

  Resp made = h.call_json(V::post, "/v1/allocations", acme,
                          {{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"count", 1}, {"image", "cloud"},
                           {"ssh_keys", json::array({kTenantKey})}});
  INFO(made.body);
  REQUIRE(made.status == 202);
  const std::string alloc = made.json["id"];
  json ready = wait_allocation(h, alloc, "ready");
  REQUIRE(ready["nodes"].size() == 1);
  const std::string id = ready["nodes"][0]["id"];
  const std::string other = id == mine ? spare : mine;
  const std::string ip = id == mine ? "10.77.0.50" : "10.77.0.51";
  CHECK(ready["nodes"][0]["addresses"].empty());  // before the sweep: nothing reported it

  REQUIRE(h.sync(leases.learner.sweep()));
  Resp n = h.call(V::get, "/v1/nodes/" + id, acme);
  INFO(n.body);
  REQUIRE(n.status == 200);
  CHECK(n.json["addresses"] == json::array({ip}));
  CHECK(n.json["address_source"] == "dhcp");
  CHECK(n.json["ssh"] == "debian@" + ip);
  // The same in the tenant's list and the allocation's members.
  Resp list = h.call(V::get, "/v1/nodes", acme);
  REQUIRE(list.status == 200);
  REQUIRE(list.json["nodes"].size() == 1);
  CHECK(list.json["nodes"][0]["addresses"] == json::array({ip}));
  CHECK(list.json["nodes"][0]["address_source"] == "dhcp");
  json member = h.call(V::get, "/v1/allocations/" + alloc, acme).json["nodes"][0];
  CHECK(member["addresses"] == json::array({ip}));
  CHECK(member["address_source"] == "dhcp");
  CHECK(member["ssh"] == "debian@" + ip);
  // Another tenant sees neither the node nor its address.
  CHECK(h.call(V::get, "/v1/nodes/" + id, globex).status == 404);
  Resp theirs = h.call(V::get, "/v1/nodes", globex);
  CHECK(theirs.json["nodes"].empty());
  CHECK(theirs.body.find(ip) == std::string::npos);
  Resp events = h.call(V::get, "/v1/events?node=" + id, globex);
  CHECK(events.body.find(ip) == std::string::npos);
  // The node.addresses event is the tenant's.
  Resp own_events = h.call(V::get, "/v1/events", acme);
  CHECK(own_events.body.find("\"node.addresses\"") != std::string::npos);
  // The undeployed node with a lease shows nothing.
  CHECK(h.call(V::get, "/v1/nodes/" + other, h.admin()).json["addresses"].empty());

  // Release: the node leaves its deploy, and the address with it, although
  // its lease is still current; the next sweep does not bring it back.
  REQUIRE(h.call(V::delete_, "/v1/allocations/" + alloc, acme).status == 202);
  wait_allocation(h, alloc, "released");
  h.wait_state(id, "available");
  REQUIRE(h.sync(leases.learner.sweep()));
  json after = h.call(V::get, "/v1/nodes/" + id, h.admin()).json;
  CHECK(after["addresses"].empty());
  CHECK(after["address_source"].is_null());
  CHECK(after["ssh"].is_null());
}

TEST_CASE("dhcp addresses: an expired lease gives none, and a lease that expires takes the address away",
          "[dhcp-addresses]") {
  ApiHarness h;
  seed_cloud(h);
  make_tenant(h, "acme");
  const std::string acme = h.make_token("tenant", "acme", "acme");
  available_node(h, "n1", json::object(), "52:54:00:d5:00:01");
  Leases leases(h);
  const int64_t now_s = SystemClock().now_ms() / 1000;
  leases.add(now_s - 60, "52:54:00:d5:00:01", "10.77.1.50");  // expired a minute ago

  Resp made = h.call_json(V::post, "/v1/allocations", acme,
                          {{"profile", "cpu-lab"}, {"kind", "baremetal"}, {"count", 1}, {"image", "cloud"},
                           {"ssh_keys", json::array({kTenantKey})}});
  REQUIRE(made.status == 202);
  json ready = wait_allocation(h, made.json["id"], "ready");
  const std::string id = ready["nodes"][0]["id"];
  REQUIRE(h.sync(leases.learner.sweep()));
  CHECK(h.call(V::get, "/v1/nodes/" + id, acme).json["addresses"].empty());

  // Renewed: it shows. Then dnsmasq lists it expired: it goes.
  std::ofstream(leases.path) << (now_s + 2) << " 52:54:00:d5:00:01 10.77.1.50 debian *\n";
  REQUIRE(h.sync(leases.learner.sweep()));
  CHECK(h.call(V::get, "/v1/nodes/" + id, acme).json["addresses"] == json::array({"10.77.1.50"}));
  std::ofstream(leases.path) << (now_s - 1) << " 52:54:00:d5:00:01 10.77.1.50 debian *\n";
  REQUIRE(h.sync(leases.learner.sweep()));
  json n = h.call(V::get, "/v1/nodes/" + id, acme).json;
  CHECK(n["addresses"].empty());
  CHECK(n["address_source"].is_null());
}
