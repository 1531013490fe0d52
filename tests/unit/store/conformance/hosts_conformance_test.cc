// HostStore conformance: hypervisor hosts, virtual machine placement through
// the real planner (controller/hosts/placement.h), the reservation rows that
// book capacity, and the races several kilnd on one database can run, on
// SQLite and PostgreSQL (backends.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "backends.h"
#include "common/ids.h"
#include "controller/hosts/placement.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// A ready host with `cpus` CPUs in one NUMA cell and 64 GiB.
Host ready_host(const std::string& name, int cpus = 4) {
  Host h;
  h.name = name;
  h.uri = "qemu+ssh://" + name + "/system";
  h.status = "ready";
  h.capacity.arch = "x86_64";
  h.capacity.cpus = cpus;
  h.capacity.memory_mib = 65536;
  NumaCell cell;
  cell.id = 0;
  cell.memory_mib = 65536;
  for (int c = 0; c < cpus; ++c) cell.cpus.push_back(c);
  h.capacity.cells = {cell};
  return h;
}

Flavour flavour(int vcpus, bool pinned) {
  Flavour f;
  f.vcpus = vcpus;
  f.memory_mib = 1024;
  f.disk_gib = 10;
  f.numa_pin = pinned;
  return f;
}

HostStore::PlacementPlanner planner_for(const Flavour& f, const std::string& node_id) {
  return [f, node_id](const Host& h, const std::vector<HostReservation>& booked) {
    return plan_placement(h, booked, f, node_id);
  };
}

template <typename Backend>
std::string virtual_node(Backend& b, const std::string& name) {
  Node n = make_node(name);
  n.kind = NodeKind::kVirtual;
  n.bmc.driver = "libvirt";
  auto r = b.nodes().create_node(n, event("node.created"));
  REQUIRE(r);
  return r->id;
}

VirtualMachine vm_of(const std::string& node_id, const std::string& domain = "") {
  VirtualMachine v;
  v.node_id = node_id;
  v.domain = domain;
  if (!domain.empty()) v.mac = "52:54:00:aa:bb:01";
  return v;
}

}  // namespace

TEMPLATE_TEST_CASE("conformance: hosts: create, read by id or name, list by name, status, refusals",
                   "[store][conformance][hosts]", KILN_STORE_BACKENDS) {
  TestType b;
  HostStore& s = b.hosts();
  Host in = ready_host("lab-b");
  in.status = "connecting";
  in.username = "kiln";
  in.password_sealed = "sealed:xyz";
  in.options.force_tcg = true;
  in.options.cpu_allocation_ratio = 2.5;
  in.options.bridge = "br0";
  auto created = s.create_host(in);
  REQUIRE(created);
  CHECK(is_uuid(created->id));
  CHECK(created->created_at == b.clock.now_ms());
  CHECK(created->updated_at == b.clock.now_ms());

  auto got = s.get_host("lab-b");
  REQUIRE(got);
  CHECK(got->id == created->id);
  CHECK(got->uri == in.uri);
  CHECK(got->username == "kiln");
  CHECK(got->password_sealed == "sealed:xyz");
  CHECK(got->options.force_tcg);
  CHECK(got->options.cpu_allocation_ratio == 2.5);
  CHECK(got->options.bridge == "br0");
  CHECK(got->status == "connecting");
  CHECK(got->capacity == in.capacity);
  CHECK(got->discovered_at == 0);
  CHECK(s.get_host(upper(created->id))->name == "lab-b");
  CHECK(s.get_host("nope").error().code == Code::kNotFound);
  CHECK(s.get_host("00000000-0000-4000-8000-000000000000").error().code == Code::kNotFound);

  auto dup = s.create_host(ready_host("lab-b"));
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == Code::kConflict);
  CHECK(dup.error().fields.at(0).field == "/name");
  auto unnamed = s.create_host(ready_host(""));
  REQUIRE_FALSE(unnamed);
  CHECK(unnamed.error().code == Code::kInvalidArgument);
  CHECK(unnamed.error().fields.at(0).field == "/name");
  auto uuid_name = s.create_host(ready_host("00000000-0000-4000-8000-00000000000b"));
  REQUIRE_FALSE(uuid_name);
  CHECK(uuid_name.error().fields.at(0).field == "/name");

  // By name in byte order.
  REQUIRE(s.create_host(ready_host("lab-a")));
  REQUIRE(s.create_host(ready_host("Lab-z")));
  auto all = s.list_hosts();
  REQUIRE(all);
  std::vector<std::string> names;
  for (const Host& h : *all) names.push_back(h.name);
  CHECK(names == std::vector<std::string>{"Lab-z", "lab-a", "lab-b"});

  // A failed connection keeps the capacity; a discovery replaces it.
  b.clock.advance_ms(50);
  REQUIRE(s.set_host_status(created->id, "unreachable", "connection refused", std::nullopt));
  got = s.get_host(created->id);
  REQUIRE(got);
  CHECK(got->status == "unreachable");
  CHECK(got->status_reason == "connection refused");
  CHECK(got->capacity == in.capacity);
  CHECK(got->discovered_at == 0);
  CHECK(got->updated_at == b.clock.now_ms());
  b.clock.advance_ms(50);
  HostCapacity found = ready_host("x", 8).capacity;
  found.gpus = {HostGpu{"0000:3b:00.0", "pci_0000_3b_00_0", "H100", 0, 12, {"nvidia-1"}}};
  REQUIRE(s.set_host_status(created->id, "ready", "", found));
  got = s.get_host("lab-b");
  REQUIRE(got);
  CHECK(got->status == "ready");
  CHECK(got->status_reason.empty());
  CHECK(got->capacity == found);
  CHECK(got->discovered_at == b.clock.now_ms());
  CHECK(s.set_host_status("00000000-0000-4000-8000-000000000000", "ready", "", std::nullopt).error().code ==
        Code::kNotFound);

  REQUIRE(s.delete_host("lab-a"));
  REQUIRE(s.delete_host(upper(created->id)));
  CHECK(s.delete_host("lab-a").error().code == Code::kNotFound);
  CHECK(s.list_hosts()->size() == 1);
}

TEMPLATE_TEST_CASE("conformance: placement books capacity once, a placed host cannot go, release frees it",
                   "[store][conformance][hosts]", KILN_STORE_BACKENDS) {
  TestType b;
  HostStore& s = b.hosts();
  const std::string n1 = virtual_node(b, "vm-1");
  const std::string n2 = virtual_node(b, "vm-2");
  const std::string n3 = virtual_node(b, "vm-3");

  // Nothing to place on yet.
  auto none = s.place_virtual_node(vm_of(n1, "kiln-vm-1"), "", planner_for(flavour(1, false), n1));
  REQUIRE_FALSE(none);
  CHECK(none.error().code == Code::kConflict);
  CHECK_THAT(none.error().message, Catch::Contains("no hypervisor host is registered"));

  auto small = s.create_host(ready_host("a-small", 2));
  auto big = s.create_host(ready_host("b-big", 4));
  REQUIRE(small);
  REQUIRE(big);

  // An unknown host is the caller's mistake.
  auto unknown = s.place_virtual_node(vm_of(n1), "nowhere", planner_for(flavour(1, false), n1));
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().code == Code::kInvalidArgument);
  CHECK(unknown.error().fields.at(0).field == "/host");

  // Pinned: 3 CPUs do not fit on a-small, so b-big (the next by name) takes it.
  b.clock.advance_ms(10);
  auto placed = s.place_virtual_node(vm_of(n1, "kiln-vm-1"), "", planner_for(flavour(3, true), n1));
  REQUIRE(placed);
  CHECK(placed->host_id == big->id);
  CHECK(placed->domain == "kiln-vm-1");
  CHECK(placed->mac == "52:54:00:aa:bb:01");
  CHECK(placed->state == "placed");
  CHECK(placed->placement.numa_cell == 0);
  CHECK(placed->placement.cpus == std::vector<int>{0, 1, 2});
  CHECK(placed->created_at == b.clock.now_ms());
  auto rows = s.host_reservations(big->id);
  REQUIRE(rows);
  std::vector<std::string> kinds;
  for (const HostReservation& r : *rows) {
    CHECK(r.node_id == n1);
    CHECK(r.host_id == big->id);
    kinds.push_back(r.kind + ":" + (r.kind == "cpu" ? r.item : "node") + ":" + std::to_string(r.amount));
  }
  // By kind, then item.
  CHECK(kinds == std::vector<std::string>{"cpu:0:1", "cpu:1:1", "cpu:2:1", "disk:node:10", "memory:node:1024",
                                          "memory@0:node:1024"});
  CHECK(s.host_reservations(small->id)->empty());

  auto stored = s.get_virtual_machine(n1);
  REQUIRE(stored);
  CHECK(stored->host_id == big->id);
  CHECK(stored->placement.cpus == placed->placement.cpus);
  CHECK(stored->placement.flavour.vcpus == 3);
  CHECK(s.get_virtual_machine(n2).error().code == Code::kNotFound);

  // Placing it again (a resumed deploy) returns the machine and books nothing.
  auto again = s.place_virtual_node(vm_of(n1, "kiln-vm-1"), "", planner_for(flavour(3, true), n1));
  REQUIRE(again);
  CHECK(again->host_id == big->id);
  CHECK(again->created_at == placed->created_at);
  CHECK(s.host_reservations(big->id)->size() == rows->size());

  // Every host short: the shortages of each, joined.
  auto full = s.place_virtual_node(vm_of(n2), "", planner_for(flavour(3, true), n2));
  REQUIRE_FALSE(full);
  CHECK(full.error().code == Code::kConflict);
  CHECK_THAT(full.error().message, Catch::StartsWith("no host has room for this node: host a-small: "));
  CHECK_THAT(full.error().message, Catch::Contains("; host b-big: "));
  CHECK(s.get_virtual_machine(n2).error().code == Code::kNotFound);

  // A planner's own error ends the search as it is; nothing is written.
  auto broken = s.place_virtual_node(vm_of(n2), "", [](const Host&, const std::vector<HostReservation>&) {
    return Result<PlacementPlan>(Error(Code::kInternal, "planner broke"));
  });
  REQUIRE_FALSE(broken);
  CHECK(broken.error().code == Code::kInternal);
  CHECK(broken.error().message == "planner broke");
  // A plan that books a CPU already booked is caught by the store.
  auto twice = s.place_virtual_node(vm_of(n2), "b-big", [&](const Host& h, const std::vector<HostReservation>&) {
    PlacementPlan p;
    p.placement.host_id = h.id;
    p.rows = {HostReservation{h.id, n2, "cpu", "1", 1}};
    return Result<PlacementPlan>(p);
  });
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code == Code::kInternal);
  CHECK_THAT(twice.error().message, Catch::Contains("cpu 1 twice on host b-big"));
  CHECK(s.get_virtual_machine(n2).error().code == Code::kNotFound);

  // Named host, by id in any case.
  b.clock.advance_ms(10);
  auto on_small = s.place_virtual_node(vm_of(n2, "kiln-vm-2"), upper(small->id), planner_for(flavour(1, false), n2));
  REQUIRE(on_small);
  CHECK(on_small->host_id == small->id);

  // Booked by an allocation's claim (no domain yet): the deploy names it.
  b.clock.advance_ms(10);
  auto claimed = s.place_virtual_node(vm_of(n3), "a-small", planner_for(flavour(1, false), n3));
  REQUIRE(claimed);
  CHECK(claimed->domain.empty());
  b.clock.advance_ms(10);
  auto deployed = s.place_virtual_node(vm_of(n3, "kiln-vm-3"), "", planner_for(flavour(1, false), n3));
  REQUIRE(deployed);
  CHECK(deployed->host_id == small->id);
  CHECK(deployed->domain == "kiln-vm-3");
  CHECK(deployed->mac == "52:54:00:aa:bb:01");
  CHECK(deployed->updated_at == b.clock.now_ms());
  CHECK(s.get_virtual_machine(n3)->domain == "kiln-vm-3");
  // ... and a second deploy does not rename it.
  auto renamed = s.place_virtual_node(vm_of(n3, "other"), "", planner_for(flavour(1, false), n3));
  REQUIRE(renamed);
  CHECK(renamed->domain == "kiln-vm-3");

  // Listing: per host, or all, oldest first.
  auto on_a = s.list_virtual_machines(small->id);
  REQUIRE(on_a);
  REQUIRE(on_a->size() == 2);
  CHECK(on_a->at(0).node_id == n2);
  CHECK(on_a->at(1).node_id == n3);
  auto every = s.list_virtual_machines("");
  REQUIRE(every);
  REQUIRE(every->size() == 3);
  CHECK(every->at(0).node_id == n1);

  // What teardown writes.
  VirtualMachine up = *stored;
  up.state = "defined";
  up.volume = "/var/lib/kiln/pool/vm-1.qcow2";
  up.nvram = "/var/lib/kiln/nvram/vm-1.fd";
  up.host_id = small->id;  // not written
  REQUIRE(s.update_virtual_machine(up));
  auto after = s.get_virtual_machine(n1);
  REQUIRE(after);
  CHECK(after->state == "defined");
  CHECK(after->volume == up.volume);
  CHECK(after->nvram == up.nvram);
  CHECK(after->host_id == big->id);
  CHECK(s.update_virtual_machine(vm_of("00000000-0000-4000-8000-000000000000")).error().code == Code::kNotFound);

  // A host with machines on it cannot be deleted; once they are released it can.
  Status busy = s.delete_host("b-big");
  REQUIRE_FALSE(busy);
  CHECK(busy.error().code == Code::kConflict);
  CHECK_THAT(busy.error().message, Catch::Contains("still has 1 virtual machine"));
  CHECK_THAT(s.delete_host("a-small").error().message, Catch::Contains("still has 2 virtual machine"));
  REQUIRE(s.release_virtual_machine(n1));
  REQUIRE(s.release_virtual_machine(n1));  // idempotent
  CHECK(s.host_reservations(big->id)->empty());
  CHECK(s.get_virtual_machine(n1).error().code == Code::kNotFound);
  REQUIRE(s.delete_host("b-big"));
  // A deleted node takes its machine and rows with it.
  REQUIRE(b.nodes().delete_node_if(n2, {}, event("node.deleted")));
  auto left = s.host_reservations(small->id);
  REQUIRE(left);
  for (const HostReservation& r : *left) CHECK(r.node_id == n3);
  REQUIRE(s.release_virtual_machine(n3));
  REQUIRE(s.delete_host("a-small"));
  CHECK(s.list_hosts()->empty());
}

TEMPLATE_TEST_CASE("conformance: racing placements on two store handles never overbook a host",
                   "[store][conformance][hosts][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  HostStore* handles[2] = {&b.hosts(), second.get()};
  // Unpinned vcpus are amounts (one row per guest): only the host lock keeps
  // them within capacity. Pinned CPUs are items the unique index also guards.
  for (bool pinned : {false, true}) {
    INFO((pinned ? "pinned" : "unpinned"));
    const std::string host_name = pinned ? "pinned-host" : "shared-host";
    auto host = b.hosts().create_host(ready_host(host_name, 6));
    REQUIRE(host);
    constexpr int kRacers = 8, kEach = 3;  // 24 guests of 2 vcpus for room for 3
    std::vector<std::vector<std::string>> nodes(kRacers);
    for (int r = 0; r < kRacers; ++r)
      for (int i = 0; i < kEach; ++i)
        nodes[r].push_back(virtual_node(b, host_name + "-" + std::to_string(r) + "-" + std::to_string(i)));
    std::atomic<int> placed{0}, other_errors{0};
    std::mutex mu;
    std::string first_error;
    std::vector<std::thread> racers;
    for (int r = 0; r < kRacers; ++r) {
      racers.emplace_back([&, r] {
        for (const std::string& id : nodes[r]) {
          auto got = handles[r % 2]->place_virtual_node(vm_of(id, "d-" + id), host_name,
                                                        planner_for(flavour(2, pinned), id));
          if (got) {
            ++placed;
          } else if (got.error().code != Code::kConflict) {
            ++other_errors;
            std::lock_guard<std::mutex> l(mu);
            if (first_error.empty()) first_error = got.error().message;
          } else {
            CHECK_THAT(got.error().message, Catch::Contains("needs 2"));
          }
        }
      });
    }
    for (auto& t : racers) t.join();
    INFO("first error: " << first_error);
    CHECK(other_errors == 0);
    CHECK(placed == 3);
    auto vms = b.hosts().list_virtual_machines(host->id);
    REQUIRE(vms);
    CHECK(vms->size() == 3);
    auto rows = b.hosts().host_reservations(host->id);
    REQUIRE(rows);
    int64_t vcpus = 0;
    std::set<std::string> cpus;
    for (const HostReservation& r : *rows) {
      if (r.kind == "vcpus") vcpus += r.amount;
      if (r.kind == "cpu") CHECK(cpus.insert(r.item).second);
    }
    CHECK(vcpus + static_cast<int64_t>(cpus.size()) == 6);
  }
}

TEMPLATE_TEST_CASE("conformance: one node placed through two handles at once gets one machine",
                   "[store][conformance][hosts][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  HostStore* handles[2] = {&b.hosts(), second.get()};
  auto host = b.hosts().create_host(ready_host("h", 64));
  REQUIRE(host);
  constexpr int kNodes = 10, kRacers = 4;
  std::vector<std::string> ids;
  for (int i = 0; i < kNodes; ++i) ids.push_back(virtual_node(b, "vm-" + std::to_string(i)));
  std::atomic<int> errors{0};
  std::mutex mu;
  std::string first_error;
  std::vector<std::vector<VirtualMachine>> got(kNodes);
  std::vector<std::thread> racers;
  for (int r = 0; r < kRacers; ++r) {
    racers.emplace_back([&, r] {
      for (int i = 0; i < kNodes; ++i) {
        auto v = handles[r % 2]->place_virtual_node(vm_of(ids[i], "dom-" + ids[i]), "",
                                                    planner_for(flavour(1, true), ids[i]));
        std::lock_guard<std::mutex> l(mu);
        if (!v) {
          ++errors;
          if (first_error.empty()) first_error = v.error().message;
          continue;
        }
        got[i].push_back(*v);
      }
    });
  }
  for (auto& t : racers) t.join();
  INFO("first error: " << first_error);
  CHECK(errors == 0);
  auto rows = b.hosts().host_reservations(host->id);
  REQUIRE(rows);
  CHECK(rows->size() == static_cast<size_t>(kNodes) * 4);  // one cpu, memory, memory@0 and disk each
  for (int i = 0; i < kNodes; ++i) {
    INFO("node " << i);
    REQUIRE(got[i].size() == static_cast<size_t>(kRacers));
    for (const VirtualMachine& v : got[i]) {
      CHECK(v.placement.cpus == got[i][0].placement.cpus);  // every caller got the same machine
      CHECK(v.domain == "dom-" + ids[i]);
    }
  }
}

TEMPLATE_TEST_CASE("conformance: a host deleted while a placement on it races never keeps a machine",
                   "[store][conformance][hosts][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  for (int round = 0; round < 12; ++round) {
    INFO("round " << round);
    const std::string name = "h" + std::to_string(round);
    REQUIRE(b.hosts().create_host(ready_host(name)));
    const std::string node = virtual_node(b, "vm-" + std::to_string(round));
    Result<VirtualMachine> placed = Error(Code::kInternal, "not run");
    Status deleted = Error(Code::kInternal, "not run");
    std::thread placer([&] {
      placed = b.hosts().place_virtual_node(vm_of(node, "d"), name, planner_for(flavour(1, false), node));
    });
    std::thread deleter([&] { deleted = second->delete_host(name); });
    placer.join();
    deleter.join();
    if (placed) {
      // The placement won: the delete saw its machine.
      REQUIRE_FALSE(deleted);
      CHECK(deleted.error().code == Code::kConflict);
      REQUIRE(b.hosts().get_host(name));
      REQUIRE(b.hosts().release_virtual_machine(node));
      REQUIRE(b.hosts().delete_host(name));
    } else {
      // The delete won: the placement no longer found the host.
      REQUIRE(deleted);
      CHECK(placed.error().code == Code::kInvalidArgument);
      CHECK(placed.error().fields.at(0).field == "/host");
    }
    CHECK(b.hosts().get_virtual_machine(node).error().code == Code::kNotFound);
    CHECK(b.hosts().get_host(name).error().code == Code::kNotFound);
  }
}
