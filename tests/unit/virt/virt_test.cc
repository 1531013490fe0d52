// Virtual nodes against libvirt's test:///default driver: host registration
// and discovery, unreachable hosts, reconnect after a drop, and deploy /
// undeploy through the real conductor with 50 concurrent deploys.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <filesystem>
#include <set>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>

#include "common/ids.h"
#include "controller/conductor/conductor.h"
#include "controller/hosts/host_registry.h"
#include "controller/hosts/virtual_machines.h"
#include "controller/hosts/virtual_maker.h"
#include "controller/model/allocation_states.h"
#include "controller/store/store.h"
#include "controller/tenancy/allocation_engine.h"
#include "drivers/libvirt/libvirt_driver.h"

#include <libvirt/libvirt.h>

using namespace kiln;
using namespace std::chrono_literals;

namespace {

// Every check passes: the gate sees a passing quick report.
class PassingValidate final : public ValidateInterface {
 public:
  asio::awaitable<Result<nlohmann::json>> validate(const DriverTarget&, ValidationPlan) override {
    co_return nlohmann::json{{"result", "pass"}, {"checks", nlohmann::json::array()}};
  }
};

class Harness {
 public:
  Harness() : work_(asio::make_work_guard(io_)), db_(4), virt_(4), box_(SecretBox::Key{7, 7, 7}) {
    char tmpl[] = "/tmp/kiln-virt-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
    REQUIRE(s);
    store_ = std::move(*s);
    REQUIRE(store_->migrate());
    HostRegistryOptions ho;
    ho.check_interval = 1h;  // tests drive check_all() themselves
    ho.initial_backoff = 0ms;
    hosts_ = std::make_unique<HostRegistry>(io_, *store_, virt_, box_, ho, Logger(LogLevel::kOff));
    vms_ = std::make_unique<VirtualMachines>(*store_, virt_, *hosts_, Logger(LogLevel::kOff));
    auto d = libvirt::make_libvirt_driver(virt_, *hosts_, Logger(LogLevel::kOff));
    add_virtual_capabilities(*d, *vms_);
    d->validate = std::make_unique<PassingValidate>();
    drivers_.add(std::move(d));
    ConductorOptions opt;
    opt.default_timeout = 60s;
    opt.timeout_check_interval = 50ms;
    opt.power_sync.interval = 0s;
    conductor_ = std::make_unique<Conductor>(io_, *store_, db_, drivers_, box_, clock_, opt, Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
    REQUIRE(sync(conductor_->start()));
    // A virtual profile and an os image.
    add_profile("vm-small", 1);
    Image img;
    img.name = "demo-os";
    img.kind = "os";
    img.format = "raw";
    img.path = dir_ + "/demo.img";
    img.state = "ready";
    REQUIRE(store_->create_image(img));
  }
  ~Harness() {
    conductor_->stop();
    hosts_->stop();
    work_.reset();
    io_.stop();
    thread_.join();
    virt_.stop();
    db_.stop();
    std::filesystem::remove_all(dir_);
  }

  template <typename T>
  T sync(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future).get();
  }

  // A profile whose virtual flavour has `vcpus` and 128 MiB.
  void add_profile(const std::string& name, int vcpus) {
    Profile p;
    p.name = name;
    p.doc = {{"name", name},
             {"plans", {{"quick", nlohmann::json::array()}, {"full", nlohmann::json::array()}}},
             {"virtual", {{"vcpus", vcpus}, {"memory_mib", 128}, {"gpus", 0}, {"disk_gib", 1}, {"hugepages", false},
                          {"numa_pin", false}}}};
    REQUIRE(store_->create_profile(p));
  }

  Host add_host(const std::string& name, const std::string& uri, HostOptions o = HostOptions()) {
    Host h;
    h.name = name;
    h.uri = uri;
    o.pool = "default-pool";  // the test driver's pool
    o.console_dir = dir_;
    h.options = o;
    auto created = store_->create_host(h);
    REQUIRE(created);
    auto connected = sync(hosts_->connect(created->id));
    REQUIRE(connected);
    return *connected;
  }

  Node virtual_node(const std::string& name, const std::string& host) {
    Node n;
    n.id = new_uuid();
    n.name = name;
    n.kind = NodeKind::kVirtual;
    n.profile = "vm-small";
    n.boot_mode = "bios";
    n.provision_state = ProvisionState::kAvailable;
    n.power_state = PowerState::kOff;
    n.bmc.driver = "libvirt";
    n.host = host;
    if (!host.empty()) n.bmc.options["host"] = host;
    EventDraft e;
    e.type = "node.created";
    auto c = store_->create_node(n, e);
    REQUIRE(c);
    return *c;
  }

  Node wait_stable(const std::string& id) {
    for (int i = 0; i < 600; ++i) {
      auto n = store_->get_node(id);
      REQUIRE(n);
      if (!is_transient(n->provision_state) && n->reservation.empty()) return *n;
      std::this_thread::sleep_for(20ms);
    }
    FAIL("node " << id << " never settled");
    return Node();
  }

  Result<Node> verb(const std::string& id, ProvisionEvent v) {
    ProvisionArgs args;
    args.image = "demo-os";
    return sync(conductor_->provision(id, v, args, Actor{"t", "test", "admin", "r"}));
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool db_, virt_;
  SecretBox box_;
  SystemClock clock_;
  std::string dir_;
  std::unique_ptr<NodeStore> store_;
  std::unique_ptr<HostRegistry> hosts_;
  std::unique_ptr<VirtualMachines> vms_;
  DriverRegistry drivers_;
  std::unique_ptr<Conductor> conductor_;
  std::thread thread_;
};

// Domains the test driver holds, by name.
std::set<std::string> domains(Harness& h, const std::string& host_id) {
  auto c = h.hosts_->connection(host_id);
  REQUIRE(c);
  std::set<std::string> out;
  virDomainPtr* doms = nullptr;
  int n = virConnectListAllDomains(c->get(), &doms, 0);
  for (int i = 0; i < n; ++i) {
    out.insert(virDomainGetName(doms[i]));
    virDomainFree(doms[i]);
  }
  free(doms);
  return out;
}

}  // namespace

TEST_CASE("a test:///default host is discovered: CPUs, NUMA cells, memory, domain types") {
  Harness h;
  Host host = h.add_host("hv", "test:///default");
  CHECK(host.status == "ready");
  CHECK(host.status_reason.empty());
  CHECK(host.capacity.cpus == 16);
  CHECK(host.capacity.cells.size() == 2);
  CHECK(host.capacity.memory_mib == 6144);
  CHECK(host.capacity.domain_types == std::vector<std::string>{"test"});
  CHECK(host.discovered_at > 0);
}

TEST_CASE("a host whose URI cannot be opened is kept, unreachable, with libvirt's message") {
  Harness h;
  Host host = h.add_host("gone", "test:///nonexistent/kiln-no-such-file.xml");
  CHECK(host.status == "unreachable");
  CHECK(host.status_reason.find("cannot open test:///nonexistent/kiln-no-such-file.xml") != std::string::npos);
  CHECK(host.status_reason.size() > std::string("cannot open test:///nonexistent/kiln-no-such-file.xml: ").size());
  // Nothing is placed on it: deploy fails naming the host's state.
  Node n = h.virtual_node("v-gone", "gone");
  REQUIRE(h.verb(n.id, ProvisionEvent::kDeploy));
  Node done = h.wait_stable(n.id);
  CHECK(done.provision_state == ProvisionState::kDeployFailed);
  CHECK(done.last_error.find("host gone: is unreachable") != std::string::npos);
  CHECK(h.store_->host_reservations(host.id)->empty());
}

TEST_CASE("a dropped connection is noticed and reconnected") {
  Harness h;
  Host host = h.add_host("hv", "test:///default");
  REQUIRE(h.hosts_->connection(host.id));
  h.hosts_->drop_for_test(host.id);
  auto down = h.hosts_->connection(host.id);
  REQUIRE_FALSE(down);
  CHECK(down.error().code == Code::kUnavailable);
  h.sync(h.hosts_->check_all());  // marks it unreachable and starts a reconnect
  CHECK(h.store_->get_host(host.id)->status == "unreachable");
  for (int i = 0; i < 250 && !h.hosts_->connection(host.id); ++i) std::this_thread::sleep_for(20ms);
  CHECK(h.hosts_->connection(host.id));
  for (int i = 0; i < 250 && h.store_->get_host(host.id)->status != "ready"; ++i) std::this_thread::sleep_for(20ms);
  CHECK(h.store_->get_host(host.id)->status == "ready");
}

TEST_CASE("libvirt URIs: a password in the userinfo is detected, hidden for display and scrubbed from messages") {
  using libvirt::display_uri;
  using libvirt::uri_has_password;
  CHECK(uri_has_password("qemu+ssh://root:pw@host/system"));
  CHECK(uri_has_password("qemu+tcp://:pw@host:16509/system"));
  CHECK_FALSE(uri_has_password("qemu+ssh://root@host/system"));
  CHECK_FALSE(uri_has_password("qemu+ssh://host:2222/system"));
  CHECK_FALSE(uri_has_password("qemu:///system"));
  CHECK_FALSE(uri_has_password("test:///default"));
  CHECK_FALSE(uri_has_password("qemu+ssh://host/system?keyfile=/a:b@c"));  // past the authority
  CHECK(display_uri("qemu+ssh://root:pw@host/system") == "qemu+ssh://root:***@host/system");
  CHECK(display_uri("qemu+ssh://root@host/system") == "qemu+ssh://root@host/system");
  CHECK(libvirt::scrub("auth for s3cret failed (s3cret)", "s3cret") == "auth for *** failed (***)");
  CHECK(libvirt::scrub("nothing", "") == "nothing");
}

TEST_CASE("a host whose stored URI holds a password is never opened, and its reason does not show it") {
  Harness h;
  Host host = h.add_host("legacy", "test://admin:legacy-pw-123@/default");
  CHECK(host.status == "unreachable");
  CHECK(host.status_reason.find("password field") != std::string::npos);
  CHECK(host.status_reason.find("legacy-pw-123") == std::string::npos);
  CHECK(h.hosts_->connects_started_for_test() == 1);  // one attempt, refused before libvirt
}

TEST_CASE("deploy places, defines and starts the domain, undeploy removes it and frees capacity") {
  Harness h;
  Host host = h.add_host("hv", "test:///default");
  Node n = h.virtual_node("v1", "hv");
  REQUIRE(h.verb(n.id, ProvisionEvent::kDeploy));
  Node active = h.wait_stable(n.id);
  INFO(active.last_error);
  REQUIRE(active.provision_state == ProvisionState::kActive);
  CHECK(active.host == "hv");
  CHECK(active.power_state == PowerState::kOn);
  std::string domain = VirtualMachines::domain_name(n.id);
  CHECK(domains(h, host.id).contains(domain));
  auto vm = h.store_->get_virtual_machine(n.id);
  REQUIRE(vm);
  CHECK(vm->state == "defined");
  CHECK(h.store_->find_port_by_address(vm->mac)->node_id == n.id);  // the agent's lookup by MAC finds it
  CHECK_FALSE(h.store_->host_reservations(host.id)->empty());
  // Power through the driver reads the domain.
  const Driver* d = h.drivers_.find("libvirt");
  DriverTarget t;
  t.node_id = n.id;
  CHECK(*h.sync(d->power->get_power_state(t)) == PowerState::kOn);

  REQUIRE(h.verb(n.id, ProvisionEvent::kUndeploy));
  Node back = h.wait_stable(n.id);
  INFO(back.last_error);
  CHECK(back.provision_state == ProvisionState::kAvailable);
  CHECK_FALSE(domains(h, host.id).contains(domain));
  CHECK(h.store_->host_reservations(host.id)->empty());
  CHECK_FALSE(h.store_->get_virtual_machine(n.id));
  CHECK_FALSE(h.store_->find_port_by_address(vm->mac));
  CHECK(*h.sync(d->power->get_power_state(t)) == PowerState::kOff);  // no domain: off
}

TEST_CASE("a domain that vanishes is an error naming it (the power sync faults the node)") {
  Harness h;
  Host host = h.add_host("hv", "test:///default");
  Node n = h.virtual_node("v1", "hv");
  REQUIRE(h.verb(n.id, ProvisionEvent::kDeploy));
  REQUIRE(h.wait_stable(n.id).provision_state == ProvisionState::kActive);
  auto c = h.hosts_->connection(host.id);
  REQUIRE(c);
  virDomainPtr dom = virDomainLookupByName(c->get(), VirtualMachines::domain_name(n.id).c_str());
  REQUIRE(dom);
  virDomainDestroy(dom);
  virDomainUndefine(dom);
  virDomainFree(dom);
  DriverTarget t;
  t.node_id = n.id;
  auto st = h.sync(h.drivers_.find("libvirt")->power->get_power_state(t));
  REQUIRE_FALSE(st);
  CHECK(st.error().message == "domain " + VirtualMachines::domain_name(n.id) + " vanished from host hv");
  // Undeploy still completes and frees everything.
  REQUIRE(h.verb(n.id, ProvisionEvent::kUndeploy));
  CHECK(h.wait_stable(n.id).provision_state == ProvisionState::kAvailable);
  CHECK(h.store_->host_reservations(host.id)->empty());
}

TEST_CASE("50 concurrent deploys never book a CPU twice, the rest fail naming what is short") {
  Harness h;
  HostOptions o;
  o.cpu_allocation_ratio = 1.0;
  Host host = h.add_host("hv", "test:///default", o);  // 16 CPUs, 6144 MiB
  std::vector<std::string> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(h.virtual_node("c" + std::to_string(i), "").id);
  std::vector<std::thread> threads;
  for (const std::string& id : ids)
    threads.emplace_back([&h, id] {
      auto r = h.verb(id, ProvisionEvent::kDeploy);
      CHECK(r);
    });
  for (auto& t : threads) t.join();
  int active = 0, failed = 0;
  for (const std::string& id : ids) {
    Node n = h.wait_stable(id);
    if (n.provision_state == ProvisionState::kActive) ++active;
    else {
      ++failed;
      CHECK(n.provision_state == ProvisionState::kDeployFailed);
      CHECK(n.last_error.find("no host has room for this node: host hv: needs 1 vcpu, 0 free") != std::string::npos);
    }
  }
  CHECK(active == 16);
  CHECK(failed == 34);
  auto rows = h.store_->host_reservations(host.id);
  REQUIRE(rows);
  int64_t vcpus = 0;
  std::set<std::string> nodes;
  for (const HostReservation& r : *rows)
    if (r.kind == "vcpus") {
      vcpus += r.amount;
      nodes.insert(r.node_id);
    }
  CHECK(vcpus == 16);
  CHECK(nodes.size() == 16);
  CHECK(domains(h, host.id).size() >= 16);
  // Undeploy everything (failed ones too): all capacity comes back.
  for (const std::string& id : ids) REQUIRE(h.verb(id, ProvisionEvent::kUndeploy));
  for (const std::string& id : ids) CHECK(h.wait_stable(id).provision_state == ProvisionState::kAvailable);
  CHECK(h.store_->host_reservations(host.id)->empty());
}

// --- virtual allocations: guests booked and made on demand ---------------

namespace {

// A tenant with room for 10 guests of `profile`, and the allocation request.
Allocation virtual_request(Harness& h, const std::string& profile, int64_t count) {
  if (!h.store_->get_tenant("acme")) {
    Tenant t;
    t.name = "acme";
    t.quotas = {TenantQuota{profile, NodeKind::kVirtual, 10}};
    REQUIRE(h.store_->create_tenant(t));
  }
  Allocation a;
  a.id = new_uuid();
  a.name = "a-" + a.id.substr(0, 8);
  a.tenant = "acme";
  a.profile = profile;
  a.kind = NodeKind::kVirtual;
  a.count = count;
  a.image = h.store_->get_image("demo-os")->id;
  a.state = AllocationState::kPending;
  return a;
}

Result<Allocation> request(Harness& h, const Allocation& a) {
  Result<Profile> p = h.store_->get_profile(a.profile);
  REQUIRE(p);
  Result<VirtualNodeMaker> vms = virtual_node_maker(*p);
  REQUIRE(vms);
  return h.store_->create_allocation(a, {}, &*vms);
}

int64_t node_count(Harness& h) {
  NodeFilter f;
  ListOptions o;
  o.limit = 1000;
  return static_cast<int64_t>(h.store_->list_nodes(f, o)->size());
}

Allocation settle(Harness& h, AllocationEngine& engine, const std::string& id, AllocationState want) {
  for (int i = 0; i < 500; ++i) {
    h.sync(engine.run_pass());
    Result<Allocation> a = h.store_->get_allocation(id, "");
    REQUIRE(a);
    if (a->state == want) return *a;
    std::this_thread::sleep_for(20ms);
  }
  Result<Allocation> a = h.store_->get_allocation(id, "");
  FAIL("allocation is " << to_string(a->state) << ", never " << to_string(want) << ": " << a->last_error);
  return *a;
}

}  // namespace

TEST_CASE("a virtual allocation books and makes its guests on demand, all or nothing, and release frees the host") {
  Harness h;
  HostOptions o;
  o.cpu_allocation_ratio = 1.0;
  Host host = h.add_host("hv", "test:///default", o);  // 16 CPUs: two 6-vCPU guests fit, not three
  h.add_profile("vm-six", 6);
  AllocationEngineOptions eo;
  eo.interval = 1h;  // the test runs the passes
  AllocationEngine engine(h.io_, *h.store_, h.db_, *h.conductor_, h.clock_, eo, Logger(LogLevel::kOff));

  // Three do not fit: refused naming /count and what the host lacks, nothing written.
  Result<Allocation> three = request(h, virtual_request(h, "vm-six", 3));
  REQUIRE_FALSE(three);
  CHECK(three.error().code == Code::kConflict);
  REQUIRE(three.error().fields.size() == 1);
  CHECK(three.error().fields[0].field == "/count");
  CHECK(three.error().message == "3 requested, 2 available (no host has room for this node: host hv: needs 6 vcpus, 4 free)");
  CHECK(node_count(h) == 0);
  CHECK(h.store_->host_reservations(host.id)->empty());
  CHECK(h.store_->list_virtual_machines("")->empty());

  // Two fit: two nodes made, claimed, their capacity booked before any deploy.
  Result<Allocation> two = request(h, virtual_request(h, "vm-six", 2));
  REQUIRE(two);
  REQUIRE(two->members.size() == 2);
  CHECK(node_count(h) == 2);
  std::set<std::string> made;
  for (const AllocationMember& m : two->members) {
    Node n = *h.store_->get_node(m.node_id);
    CHECK(n.kind == NodeKind::kVirtual);
    CHECK(n.bmc.driver == "libvirt");
    CHECK(n.allocation == two->id);
    CHECK(n.tenant == "acme");
    Result<VirtualMachine> vm = h.store_->get_virtual_machine(n.id);
    REQUIRE(vm);
    CHECK(vm->host_id == host.id);
    CHECK(vm->domain.empty());  // booked, not yet defined
    made.insert(n.id);
  }
  // The host is full now: a third allocation of one is refused.
  Result<Allocation> one_more = request(h, virtual_request(h, "vm-six", 1));
  REQUIRE_FALSE(one_more);
  CHECK(one_more.error().code == Code::kConflict);
  CHECK(node_count(h) == 2);

  // The engine deploys them on the bookings: domains defined, ready.
  settle(h, engine, two->id, AllocationState::kReady);
  std::set<std::string> doms = domains(h, host.id);
  for (const std::string& id : made) {
    CHECK(doms.contains(VirtualMachines::domain_name(id)));
    CHECK(h.store_->get_virtual_machine(id)->domain == VirtualMachines::domain_name(id));
  }

  // Release destroys the guests and frees the host; the nodes stay as slots.
  REQUIRE(h.sync(engine.release(two->id, "test", "t", "r")));
  settle(h, engine, two->id, AllocationState::kReleased);
  doms = domains(h, host.id);
  for (const std::string& id : made) {
    CHECK_FALSE(doms.contains(VirtualMachines::domain_name(id)));
    Node n = *h.store_->get_node(id);
    CHECK(n.provision_state == ProvisionState::kAvailable);
    CHECK(n.tenant.empty());
    CHECK(n.allocation.empty());
  }
  CHECK(h.store_->host_reservations(host.id)->empty());

  // The next allocation reuses the slots instead of making more.
  Result<Allocation> again = request(h, virtual_request(h, "vm-six", 2));
  REQUIRE(again);
  CHECK(node_count(h) == 2);
  for (const AllocationMember& m : again->members) CHECK(made.contains(m.node_id));

  // Released before any deploy: the booking is given back at once.
  REQUIRE(h.sync(engine.release(again->id, "test", "t", "r")));
  settle(h, engine, again->id, AllocationState::kReleased);
  CHECK(h.store_->host_reservations(host.id)->empty());
  CHECK(h.store_->list_virtual_machines("")->empty());
}
