// LeaseAddressLearner (controller/agent/lease_address_learner.h) on a real
// SQLite store beside the real AgentBroker, over a lease file the test writes
// as dnsmasq does: which nodes learn addresses, that an agent's report wins,
// that forget() and a moved-on node leave nothing behind, and the sweep loop
// noticing a new lease.
#include <fstream>
#include <string>
#include <vector>

#include "controller/agent/lease_address_learner.h"
#include "controller/boot/dhcp_leases.h"
#include "controller/boot/lease_addresses.h"
#include "tests/support/wait_until.h"
#include "tests/unit/agent_broker/broker_harness.h"

using namespace kiln;
using namespace kiln::testing;
using Strings = std::vector<std::string>;

namespace {

struct Learner {
  explicit Learner(Harness& h, LeaseAddressLearnerOptions o = {})
      : path(make_dir() + "/dnsmasq.leases"),
        learner(h.io(), h.store(), h.store(), h.db(), clock, path, o, Logger(LogLevel::kOff)) {
    std::ofstream(path).flush();
  }
  ~Learner() {
    learner.stop();
    learner.join();
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  }
  void add(int64_t expiry, const std::string& mac, const std::string& ip) {
    std::ofstream(path, std::ios::app) << expiry << " " << mac << " " << ip << " host *\n";
  }
  SystemClock clock;
  std::string path;
  LeaseAddressLearner learner;
};

void cloud_image(Harness& h) {
  Image img;
  img.name = "cloud-os";
  img.kind = "os";
  img.format = "raw";
  img.sha256 = std::string(64, 'a');
  img.size = 1;
  img.source = img.path = "/nonexistent";
  img.ssh_user = "debian";
  // The deployable mark: `state` since qcow2 conversion, `status` before.
  [](auto& i) {
    if constexpr (requires { i.state; }) i.state = "ready";
    else i.status = "ready";
  }(img);
  REQUIRE(h.store().create_image(img));
}

Node with(Harness& h, const std::string& id, const std::function<void(Node&)>& f) {
  auto r = h.store().update_node_if(id, NodeCondition{}, [&](Node& m) { f(m); return ok_status(); }, {});
  REQUIRE(r);
  return *r;
}

}  // namespace

TEST_CASE("dhcp addresses: which nodes learn them - active, or deploying once the OS phoned home") {
  Node n;
  n.provision_state = S::kActive;
  CHECK(learns_leased_addresses(n));
  for (S s : kAllProvisionStates) {
    if (s == S::kActive) continue;
    n.provision_state = s;
    INFO(to_string(s));
    CHECK_FALSE(learns_leased_addresses(n));  // the deploy ramdisk holds the same MAC's lease
  }
  n.ssh_host_keys.push_back(SshHostKey{});
  n.provision_state = S::kDeploying;
  CHECK(learns_leased_addresses(n));
  n.provision_state = S::kValidating;
  CHECK(learns_leased_addresses(n));
  n.provision_state = S::kCleaning;
  CHECK_FALSE(learns_leased_addresses(n));
}

TEST_CASE("dhcp addresses: an active node learns its lease with its login and an event for its tenant, others do not") {
  Harness h;
  cloud_image(h);
  Learner l(h);
  Node a = h.node("a", "52:54:00:1e:00:01", S::kActive);
  a = with(h, a.id, [](Node& m) {
    m.image = "cloud-os";
    m.tenant = "acme";
  });
  Node b = h.node("b", "52:54:00:1e:00:02", S::kAvailable);
  l.add(0, "52:54:00:1E:00:01", "10.9.0.10");  // dnsmasq may write upper case
  l.add(0, "52:54:00:1e:00:02", "10.9.0.11");

  auto learned = h.sync(l.learner.learn(a.id));
  REQUIRE(learned);
  CHECK(*learned);
  Node seen = *h.store().get_node(a.id);
  CHECK(seen.addresses == Strings{"10.9.0.10"});
  CHECK(seen.address_source == AddressSource::kDhcp);
  CHECK(seen.ssh == "debian@10.9.0.10");
  auto evs = h.store().list_events(0, 100, a.id, std::nullopt);
  REQUIRE(evs);
  REQUIRE_FALSE(evs->empty());
  CHECK(evs->back().type == "node.addresses");
  CHECK(evs->back().tenant == "acme");
  CHECK(evs->back().detail["source"] == "dhcp");
  CHECK(evs->back().detail["addresses"] == json::array({"10.9.0.10"}));

  // Nothing to change: no write.
  learned = h.sync(l.learner.learn(a.id));
  REQUIRE(learned);
  CHECK_FALSE(*learned);
  CHECK(h.store().get_node(a.id)->version == seen.version);

  // An available node with a lease learns nothing, nor does the sweep give it one.
  REQUIRE(h.sync(l.learner.sweep()));
  CHECK(h.store().get_node(b.id)->addresses.empty());
  CHECK(h.store().get_node(a.id)->addresses == Strings{"10.9.0.10"});
}

TEST_CASE("dhcp addresses: an agent's report wins over DHCP, and forget() empties both") {
  Harness h;
  cloud_image(h);
  Learner l(h);
  const std::string mac = "52:54:00:1e:01:01";
  Node n = h.node("agent-os", mac, S::kDeploying, "wait_boot");
  with(h, n.id, [](Node& m) { m.image = "cloud-os"; });
  const std::string secret = h.os_secret(n);
  auto session = h.lookup(mac, secret, "os", Strings{"192.0.2.20"});
  REQUIRE(session);
  with(h, n.id, [](Node& m) { m.provision_state = S::kActive; m.provision_step.clear(); });
  l.add(0, mac, "10.9.1.10");

  // The agent reported: DHCP writes nothing over it.
  auto learned = h.sync(l.learner.learn(n.id));
  REQUIRE(learned);
  CHECK_FALSE(*learned);
  Node seen = *h.store().get_node(n.id);
  CHECK(seen.addresses == Strings{"192.0.2.20"});
  CHECK(seen.address_source == AddressSource::kAgent);

  // DHCP first, then the agent says the same address: it becomes the agent's.
  with(h, n.id, [](Node& m) {
    m.addresses = {"10.9.1.10"};
    m.address_source = AddressSource::kDhcp;
    m.provision_state = S::kDeploying;
    m.provision_step = "wait_boot";
  });
  auto again = h.lookup(mac, secret, "os", Strings{"10.9.1.10"});
  REQUIRE(again);
  seen = *h.store().get_node(n.id);
  CHECK(seen.addresses == Strings{"10.9.1.10"});
  CHECK(seen.address_source == AddressSource::kAgent);

  // A new boot attempt: whatever the source, nothing is left.
  with(h, n.id, [](Node& m) { m.address_source = AddressSource::kDhcp; });
  REQUIRE(h.sync(h.broker().forget(n.id)));
  seen = *h.store().get_node(n.id);
  CHECK(seen.addresses.empty());
  CHECK(seen.address_source == AddressSource::kNone);
  CHECK(seen.ssh.empty());
}

TEST_CASE("dhcp addresses: a node that changed after it was read is left alone") {
  Harness h;
  Learner l(h);
  const std::string mac = "52:54:00:1e:02:01";
  Node n = h.node("racy", mac, S::kActive);
  l.add(0, mac, "10.9.2.10");
  // Read while active; meanwhile an undeploy began.
  Node stale = *h.store().get_node(n.id);
  with(h, n.id, [](Node& m) { m.provision_state = S::kCleaning; });
  auto leases = boot::LeaseFile(l.path).read();
  REQUIRE(leases);
  boot::LeaseIndex index(std::move(*leases));
  auto learned = h.sync(l.learner.learn(stale, index, 0));
  REQUIRE(learned);
  CHECK_FALSE(*learned);
  CHECK(h.store().get_node(n.id)->addresses.empty());
}

TEST_CASE("dhcp addresses: a lease file kilnd cannot parse writes nothing and says why") {
  Harness h;
  Learner l(h);
  Node n = h.node("broken", "52:54:00:1e:03:01", S::kActive);
  std::ofstream(l.path) << "0 52:54:00:1e:03:01 10.9.3.10 *\n";  // four fields
  auto learned = h.sync(l.learner.learn(n.id));
  REQUIRE_FALSE(learned);
  CHECK(learned.error().code == Code::kInvalidArgument);
  CHECK(learned.error().message.find("line 1") != std::string::npos);
  CHECK(h.store().get_node(n.id)->addresses.empty());
}

TEST_CASE("dhcp addresses: the sweep loop notices a new lease in the file") {
  Harness h;
  LeaseAddressLearnerOptions o;
  o.poll_interval = std::chrono::milliseconds(20);
  o.resync_interval = std::chrono::hours(1);  // only a file change can wake it
  Learner l(h, o);
  const std::string mac = "52:54:00:1e:04:01";
  Node n = h.node("swept", mac, S::kActive);
  l.learner.run();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the first sweep found nothing
  CHECK(h.store().get_node(n.id)->addresses.empty());
  l.add(0, mac, "10.9.4.10");
  CHECK(wait_until([&] { return h.store().get_node(n.id)->addresses == Strings{"10.9.4.10"}; },
                   std::chrono::seconds(5), std::chrono::milliseconds(20)));
}
