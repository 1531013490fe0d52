// NodeRepo conformance: the same cases on SQLite and on PostgreSQL (backends.h).
#include <catch2/catch.hpp>

#include "backends.h"
#include "common/ids.h"
#include "common/ssh_host_key.h"

using namespace kiln;
using namespace kiln::test;

namespace {

Node full_node() {
  Node n = make_node("gpu-01", {"52:54:00:00:00:02", "52:54:00:00:00:01"});
  n.kind = NodeKind::kVirtual;
  n.bmc = BmcInfo{"redfish", "https://10.0.0.5", "root", "sealed:abc", "System.1", "dom", false,
                  nlohmann::json{{"ca_file", "/etc/ca.pem"}, {"retries", 3}}};
  n.boot_mode = "bios";
  n.profile = "h100x8";
  n.traits = {"CUSTOM_NVLINK", "CUSTOM_IB"};
  n.provision_state = ProvisionState::kDeploying;
  n.target_provision_state = ProvisionState::kActive;
  n.provision_step = "write_image";
  n.deadline_at = 1'700'000'900'000;
  n.power_state = PowerState::kOn;
  n.target_power_state = PowerState::kOff;
  n.maintenance = true;
  n.maintenance_reason = "fan";
  n.fault = "power_failure";
  n.last_error = "boom";
  n.tenant = "acme";
  n.allocation = "alloc-1";
  n.host = "qemu+ssh://hv1/system";
  n.inventory = nlohmann::json{{"cpus", 128}, {"gpus", {"h100", "h100"}}};
  n.last_validation = "report-9";
  n.image = "ubuntu-24.04-cuda";
  n.addresses = {"10.0.0.9", "fd00::9"};
  n.address_source = AddressSource::kDhcp;  // not the default: proves the column is written and read
  n.ssh = "ubuntu@10.0.0.9";
  // Host keys as a phone-home stored them: written as {type, key}, read
  // back through the host key rule with their fingerprints.
  n.ssh_host_keys = {*parse_ssh_host_key("ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAIM6jHR8C6awzVMqmZAWuFW2u1isrYanrS/Ozu11WcKN8")};
  n.reservation = "op-1";
  n.ironic = nlohmann::json{{"driver", "redfish"}, {"extra", {{"rack", "r1"}, {"u", 7}}}};  // not {}: proves the column
  return n;
}

void check_same_fields(const Node& g, const Node& n) {
  CHECK(g.name == n.name);
  CHECK(g.kind == n.kind);
  CHECK(g.bmc.driver == n.bmc.driver);
  CHECK(g.bmc.address == n.bmc.address);
  CHECK(g.bmc.username == n.bmc.username);
  CHECK(g.bmc.password_sealed == n.bmc.password_sealed);
  CHECK(g.bmc.system_id == n.bmc.system_id);
  CHECK(g.bmc.domain == n.bmc.domain);
  CHECK(g.bmc.verify_tls == n.bmc.verify_tls);
  CHECK(g.bmc.options == n.bmc.options);
  CHECK(g.boot_mode == n.boot_mode);
  CHECK(g.profile == n.profile);
  CHECK(g.traits == n.traits);
  CHECK(g.provision_state == n.provision_state);
  CHECK(g.target_provision_state == n.target_provision_state);
  CHECK(g.provision_step == n.provision_step);
  CHECK(g.deadline_at == n.deadline_at);
  CHECK(g.power_state == n.power_state);
  CHECK(g.target_power_state == n.target_power_state);
  CHECK(g.maintenance == n.maintenance);
  CHECK(g.maintenance_reason == n.maintenance_reason);
  CHECK(g.fault == n.fault);
  CHECK(g.last_error == n.last_error);
  CHECK(g.tenant == n.tenant);
  CHECK(g.allocation == n.allocation);
  CHECK(g.host == n.host);
  CHECK(g.inventory == n.inventory);
  CHECK(g.last_validation == n.last_validation);
  CHECK(g.image == n.image);
  CHECK(g.addresses == n.addresses);
  CHECK(g.address_source == n.address_source);
  CHECK(g.ssh == n.ssh);
  CHECK(g.ssh_host_keys == n.ssh_host_keys);
  CHECK(g.ironic == n.ironic);
  CHECK(g.reservation == n.reservation);
}

int64_t event_count(EventLog& log) {
  auto e = log.list_events(0, 10000, std::nullopt, std::nullopt);
  REQUIRE(e);
  return static_cast<int64_t>(e->size());
}

}  // namespace

TEMPLATE_TEST_CASE("conformance: create_node round-trips every field, by id and by name", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  const Node n = full_node();
  EventDraft ev = event("node.created");
  ev.request_id = "req-1";
  ev.detail = {{"actor", "admin"}};
  auto created = b.nodes().create_node(n, ev);
  REQUIRE(created);
  CHECK(is_uuid(created->id));
  CHECK(created->version == 1);
  CHECK(created->created_at == b.clock.now_ms());

  for (const std::string& key : {created->id, std::string("gpu-01")}) {
    auto got = b.nodes().get_node(key);
    REQUIRE(got);
    CHECK(got->id == created->id);
    check_same_fields(*got, n);
    CHECK(got->version == 1);
    REQUIRE(got->ports.size() == 2);  // in the order given
    CHECK(got->ports[0].address == "52:54:00:00:00:02");
    CHECK(got->ports[1].address == "52:54:00:00:00:01");
    CHECK(got->ports[0].node_id == created->id);
  }
  std::string upper = created->id;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(b.nodes().get_node(upper));

  // An unnamed node with no inventory keeps its NULLs.
  auto bare = b.nodes().create_node(make_node(""), event("node.created"));
  REQUIRE(bare);
  auto bare_got = b.nodes().get_node(bare->id);
  REQUIRE(bare_got);
  CHECK(bare_got->name.empty());
  CHECK(bare_got->inventory.is_null());
  CHECK_FALSE(bare_got->target_provision_state.has_value());

  auto events = b.events().list_events(0, 10, std::nullopt, std::nullopt);
  REQUIRE(events);
  REQUIRE(events->size() == 2);
  CHECK(events->at(0).type == "node.created");
  CHECK(events->at(0).node_id == created->id);
  CHECK(events->at(0).tenant == "acme");
  CHECK(events->at(0).request_id == "req-1");
  CHECK(events->at(0).detail == ev.detail);
  CHECK(b.nodes().get_node("nope").error().code == Code::kNotFound);
}

TEMPLATE_TEST_CASE("conformance: duplicates are refused naming the field, and nothing is written",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  REQUIRE(b.nodes().create_node(make_node("a", {"aa:00:00:00:00:01"}), event("node.created")));

  auto same_name = b.nodes().create_node(make_node("a", {"aa:00:00:00:00:09"}), event("node.created"));
  REQUIRE_FALSE(same_name);
  CHECK(same_name.error().code == Code::kConflict);
  REQUIRE(same_name.error().fields.size() == 1);
  CHECK(same_name.error().fields[0].field == "/name");

  auto same_mac = b.nodes().create_node(make_node("b", {"bb:00:00:00:00:01", "aa:00:00:00:00:01"}),
                                        event("node.created"));
  REQUIRE_FALSE(same_mac);
  CHECK(same_mac.error().code == Code::kConflict);
  REQUIRE(same_mac.error().fields.size() == 1);
  CHECK(same_mac.error().fields[0].field == "/ports/1/address");

  // Neither refused node, nor its first port, nor its event was written.
  CHECK_FALSE(b.nodes().get_node("b"));
  CHECK(b.nodes().find_port_by_address("bb:00:00:00:00:01").error().code == Code::kNotFound);
  CHECK(event_count(b.events()) == 1);

  Node bad = make_node("x");
  bad.id = "not-a-uuid";
  auto r = b.nodes().create_node(bad, event("node.created"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kInvalidArgument);
}

TEMPLATE_TEST_CASE("conformance: update_node_if checks every condition inside the transaction",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  Node n = make_node("n1", {"aa:00:00:00:00:01"});
  n.provision_state = ProvisionState::kAvailable;
  n.tenant = "acme";
  auto c = b.nodes().create_node(n, event("node.created"));
  REQUIRE(c);
  b.clock.advance_ms(1000);

  // Take the reservation, bump state, append two events.
  EventDraft e1 = event("provision.transition");
  e1.from_state = "available";
  e1.to_state = "deploying";
  auto taken = b.nodes().update_node_if(
      "n1", NodeCondition{.version = 1, .reservation = "", .provision_state = ProvisionState::kAvailable},
      [](Node& x) {
        x.reservation = "op-1";
        x.provision_state = ProvisionState::kDeploying;
        x.version = 99;  // not the caller's to set
        x.tenant = "";   // a release: the event still goes to the old tenant
        return ok_status();
      },
      {e1, event("note")});
  REQUIRE(taken);
  CHECK(taken->version == 2);
  CHECK(taken->updated_at == b.clock.now_ms());
  CHECK(taken->ports.size() == 1);
  auto got = b.nodes().get_node("n1");
  REQUIRE(got);
  CHECK(got->reservation == "op-1");
  CHECK(got->version == 2);
  auto evs = b.events().list_events(1, 10, std::nullopt, std::nullopt);
  REQUIRE(evs);
  REQUIRE(evs->size() == 2);
  CHECK(evs->at(0).node_id == c->id);
  CHECK(evs->at(0).tenant == "acme");
  CHECK(evs->at(0).to_state == "deploying");

  // Each failing condition: its code, and nothing written.
  auto stale = b.nodes().update_node_if("n1", NodeCondition{.version = 1}, nullptr, {event("x")});
  CHECK(stale.error().code == Code::kPreconditionFailed);
  auto busy = b.nodes().update_node_if("n1", NodeCondition{.reservation = ""}, nullptr, {event("x")});
  CHECK(busy.error().code == Code::kConflict);
  auto not_held = b.nodes().update_node_if("n1", NodeCondition{.reservation = "op-2"}, nullptr, {event("x")});
  CHECK(not_held.error().code == Code::kConflict);
  auto state = b.nodes().update_node_if("n1", NodeCondition{.provision_state = ProvisionState::kAvailable},
                                        nullptr, {event("x")});
  CHECK(state.error().code == Code::kConflict);
  auto aborted = b.nodes().update_node_if(
      "n1", NodeCondition{.reservation = "op-1"},
      [](Node&) { return Status(Error(Code::kUnprocessable, "mutate says no")); }, {event("x")});
  REQUIRE_FALSE(aborted);
  CHECK(aborted.error().code == Code::kUnprocessable);
  auto renamed_to_uuid = b.nodes().update_node_if(
      "n1", {}, [](Node& x) { x.name = new_uuid(); return ok_status(); }, {event("x")});
  CHECK(renamed_to_uuid.error().code == Code::kInvalidArgument);
  auto missing = b.nodes().update_node_if("nope", {}, nullptr, {event("x")});
  CHECK(missing.error().code == Code::kNotFound);

  got = b.nodes().get_node("n1");
  REQUIRE(got);
  CHECK(got->version == 2);
  CHECK(event_count(b.events()) == 3);

  // Release, then delete under a condition; ports go with the node.
  REQUIRE(b.nodes().update_node_if("n1", NodeCondition{.reservation = "op-1"},
                                   [](Node& x) { x.reservation.clear(); return ok_status(); }, {}));
  CHECK(b.nodes().delete_node_if("n1", NodeCondition{.version = 1}, event("node.deleted")).error().code ==
        Code::kPreconditionFailed);
  REQUIRE(b.nodes().delete_node_if("n1", NodeCondition{.reservation = ""}, event("node.deleted")));
  CHECK(b.nodes().get_node("n1").error().code == Code::kNotFound);
  CHECK(b.nodes().find_port_by_address("aa:00:00:00:00:01").error().code == Code::kNotFound);
  auto last = b.events().list_events(3, 10, c->id, std::nullopt);
  REQUIRE(last);
  REQUIRE(last->size() == 1);
  CHECK(last->at(0).type == "node.deleted");
}

TEMPLATE_TEST_CASE("conformance: ports are part of the node: create, find, list, delete", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  auto n = b.nodes().create_node(make_node("n1"), event("node.created"));
  REQUIRE(n);
  auto other = b.nodes().create_node(make_node("n2", {"cc:00:00:00:00:01"}), event("node.created"));
  REQUIRE(other);

  Port p;
  p.node_id = "n1";  // by name
  p.address = "aa:00:00:00:00:01";
  p.pxe = false;
  auto created = b.nodes().create_port(p, event("port.created"));
  REQUIRE(created);
  CHECK(created->node_id == n->id);
  CHECK(b.nodes().get_node("n1")->version == 2);  // the node's ETag moved

  Port dup = p;
  dup.id.clear();
  auto refused = b.nodes().create_port(dup, event("port.created"));
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Code::kConflict);
  REQUIRE(refused.error().fields.size() == 1);
  CHECK(refused.error().fields[0].field == "/address");
  Port orphan;
  orphan.node_id = "ghost";
  orphan.address = "dd:00:00:00:00:01";
  auto no_node = b.nodes().create_port(orphan, event("port.created"));
  CHECK(no_node.error().code == Code::kNotFound);

  auto found = b.nodes().find_port_by_address("aa:00:00:00:00:01");
  REQUIRE(found);
  CHECK(found->id == created->id);
  CHECK(found->pxe == false);
  CHECK(b.nodes().get_port(created->id));

  auto all = b.nodes().list_ports(std::nullopt, 10, "");
  REQUIRE(all);
  CHECK(all->size() == 2);
  auto mine = b.nodes().list_ports(n->id, 10, "");
  REQUIRE(mine);
  REQUIRE(mine->size() == 1);
  auto page1 = b.nodes().list_ports(std::nullopt, 1, "");
  REQUIRE(page1);
  REQUIRE(page1->size() == 1);
  auto page2 = b.nodes().list_ports(std::nullopt, 1, page1->at(0).id);
  REQUIRE(page2);
  REQUIRE(page2->size() == 1);
  CHECK(page2->at(0).id > page1->at(0).id);
  CHECK(b.nodes().list_ports(std::nullopt, 0, "").error().code == Code::kInvalidArgument);

  REQUIRE(b.nodes().delete_port(created->id, event("port.deleted")));
  CHECK(b.nodes().get_port(created->id).error().code == Code::kNotFound);
  CHECK(b.nodes().delete_port(created->id, event("port.deleted")).error().code == Code::kNotFound);
  CHECK(b.nodes().get_node("n1")->version == 3);
  auto evs = b.events().list_events(0, 10, n->id, std::nullopt);
  REQUIRE(evs);
  REQUIRE(evs->size() == 3);
  CHECK(evs->at(2).type == "port.deleted");
}

TEMPLATE_TEST_CASE("conformance: list_nodes pages every sort key both ways, filters, refuses bad input",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  // 7 nodes: names out of creation order, two unnamed, mixed states.
  const std::vector<std::string> names = {"delta", "", "alpha", "Charlie", "", "bravo", "echo"};
  for (size_t i = 0; i < names.size(); ++i) {
    Node n = make_node(names[i]);
    n.provision_state = i % 2 == 0 ? ProvisionState::kAvailable : ProvisionState::kManageable;
    n.maintenance = i == 3;
    n.tenant = i < 2 ? "acme" : "";
    REQUIRE(b.nodes().create_node(n, event("node.created")));
    b.clock.advance_ms(10);
  }
  for (const char* key : {"created_at", "updated_at", "name", "provision_state", "id"}) {
    for (bool desc : {false, true}) {
      INFO("sort " << key << (desc ? " desc" : " asc"));
      auto whole = b.nodes().list_nodes({}, ListOptions{100, "", key, desc});
      REQUIRE(whole);
      REQUIRE(whole->size() == names.size());
      std::vector<std::string> paged;
      std::string marker;
      for (int guard = 0; guard < 10; ++guard) {
        auto page = b.nodes().list_nodes({}, ListOptions{3, marker, key, desc});
        REQUIRE(page);
        for (const Node& n : *page) paged.push_back(n.id);
        if (page->size() < 3) break;
        marker = page->back().id;
      }
      std::vector<std::string> expected;
      for (const Node& n : *whole) expected.push_back(n.id);
      CHECK(paged == expected);
      if (std::string(key) == "name" && !desc) {
        // Byte order, unnamed first: "", "", "Charlie", "alpha", ...
        CHECK(whole->at(0).name.empty());
        CHECK(whole->at(2).name == "Charlie");
        CHECK(whole->at(3).name == "alpha");
      }
    }
  }
  NodeFilter avail;
  avail.provision_state = ProvisionState::kAvailable;
  CHECK(b.nodes().list_nodes(avail, {})->size() == 4);
  NodeFilter maint;
  maint.maintenance = true;
  CHECK(b.nodes().list_nodes(maint, {})->size() == 1);
  maint.maintenance = false;
  CHECK(b.nodes().list_nodes(maint, {})->size() == 6);
  NodeFilter acme;
  acme.tenant = "acme";
  CHECK(b.nodes().list_nodes(acme, {})->size() == 2);

  CHECK(b.nodes().list_nodes({}, ListOptions{0}).error().code == Code::kInvalidArgument);
  auto bad_sort = b.nodes().list_nodes({}, ListOptions{10, "", "power"});
  REQUIRE_FALSE(bad_sort);
  CHECK(bad_sort.error().fields.at(0).field == "sort");
  auto bad_marker = b.nodes().list_nodes({}, ListOptions{10, new_uuid()});
  REQUIRE_FALSE(bad_marker);
  CHECK(bad_marker.error().fields.at(0).field == "marker");
}

TEMPLATE_TEST_CASE("conformance: deadlines, in-flight nodes and counts", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  const int64_t now = b.clock.now_ms();
  auto mk = [&](const std::string& name, ProvisionState st, int64_t deadline, const std::string& reservation) {
    Node n = make_node(name, {});
    n.provision_state = st;
    n.deadline_at = deadline;
    n.reservation = reservation;
    n.profile = "h100";
    auto c = b.nodes().create_node(n, event("node.created"));
    REQUIRE(c);
    return c->id;
  };
  mk("idle", ProvisionState::kAvailable, 0, "");
  mk("free2", ProvisionState::kAvailable, 0, "");
  std::string late = mk("late", ProvisionState::kDeploying, now - 5, "op-1");
  mk("soon", ProvisionState::kDeploying, now + 60'000, "");
  std::string held = mk("held", ProvisionState::kManageable, 0, "op-2");

  auto past = b.nodes().nodes_past_deadline(now, 10);
  REQUIRE(past);
  REQUIRE(past->size() == 1);
  CHECK(past->at(0).id == late);

  auto flight = b.nodes().nodes_in_flight();
  REQUIRE(flight);
  std::vector<std::string> ids;
  for (const Node& n : *flight) ids.push_back(n.name);
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::string>{"held", "late", "soon"});
  CHECK(std::is_sorted(flight->begin(), flight->end(), [](const Node& a, const Node& c) { return a.id < c.id; }));

  // The operations named for one conductor: the prefix, not a substring or
  // a longer id that starts the same ("c1/" is not "c10/").
  std::string c1a = mk("c1-a", ProvisionState::kCleaning, 0, "c1/op-a");
  std::string c1b = mk("c1-b", ProvisionState::kAvailable, 0, "c1/op-b");
  mk("c10", ProvisionState::kCleaning, 0, "c10/op-c");
  mk("x-c1", ProvisionState::kCleaning, 0, "x-c1/op-d");
  auto mine = b.nodes().nodes_held_by_prefix("c1/");
  REQUIRE(mine);
  REQUIRE(mine->size() == 2);
  std::vector<std::string> want = {c1a, c1b};
  std::sort(want.begin(), want.end());
  CHECK(mine->at(0).node_id == want[0]);
  CHECK(mine->at(1).node_id == want[1]);
  for (const HeldNode& h : *mine) {
    CHECK(h.reservation == (h.node_id == c1a ? "c1/op-a" : "c1/op-b"));
    CHECK(h.provision_state == (h.node_id == c1a ? ProvisionState::kCleaning : ProvisionState::kAvailable));
  }
  auto none = b.nodes().nodes_held_by_prefix("c2/");
  REQUIRE(none);
  CHECK(none->empty());

  auto counts = b.nodes().count_nodes_by_state();
  REQUIRE(counts);
  CHECK(counts->at("available") == 3);
  CHECK(counts->at("deploying") == 2);
  CHECK(counts->at("manageable") == 1);
  CHECK(counts->at("cleaning") == 3);
  CHECK(counts->at("active") == 0);

  auto free = b.nodes().count_free_nodes();
  REQUIRE(free);
  REQUIRE(free->size() == 1);
  CHECK(free->at({"h100", NodeKind::kBaremetal}) == 2);  // c1-b is held
  (void)held;
}

TEMPLATE_TEST_CASE("conformance: ssh_host_keys are stored, cleared, and a row no rule accepts is never read back",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  auto created = b.nodes().create_node(make_node("vm-keys"), event("node.created"));
  REQUIRE(created);
  CHECK(created->ssh_host_keys.empty());
  CHECK(b.nodes().get_node(created->id)->ssh_host_keys.empty());
  const Node full = full_node();
  auto stored = b.nodes().update_node_if(created->id, NodeCondition{},
                                         [&](Node& n) {
                                           n.ssh_host_keys = full.ssh_host_keys;
                                           return ok_status();
                                         },
                                         {});
  REQUIRE(stored);
  auto got = b.nodes().get_node(created->id);
  REQUIRE(got);
  REQUIRE(got->ssh_host_keys.size() == 1);
  CHECK(got->ssh_host_keys == full.ssh_host_keys);
  CHECK(got->ssh_host_keys[0].sha256.rfind("SHA256:", 0) == 0);
  auto cleared = b.nodes().update_node_if(created->id, NodeCondition{},
                                          [](Node& n) {
                                            n.ssh_host_keys.clear();
                                            return ok_status();
                                          },
                                          {});
  REQUIRE(cleared);
  CHECK(b.nodes().get_node(created->id)->ssh_host_keys.empty());
  // What reads the column back goes through the host key rule: a key that
  // is not one (a hand-edited row) is skipped, never shown.
  SshHostKey forged = full.ssh_host_keys[0];
  forged.key = "AAAA\nProxyCommand";
  auto forged_write = b.nodes().update_node_if(created->id, NodeCondition{},
                                               [&](Node& n) {
                                                 n.ssh_host_keys = {forged, full.ssh_host_keys[0]};
                                                 return ok_status();
                                               },
                                               {});
  REQUIRE(forged_write);
  CHECK(b.nodes().get_node(created->id)->ssh_host_keys == full.ssh_host_keys);
}

TEMPLATE_TEST_CASE("conformance: ports added in one millisecond read back in the order they were added",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  // The clock stands still: created_at ties, so the order is the engine's
  // insertion order (SQLite's rowid, PostgreSQL's ord), whichever way a node
  // is read (get_node loads one node's ports, list_nodes a page's at once).
  auto n = b.nodes().create_node(make_node("n1"), event("node.created"));
  REQUIRE(n);
  const std::vector<std::string> macs = {"aa:00:00:00:00:09", "aa:00:00:00:00:01", "aa:00:00:00:00:05",
                                         "aa:00:00:00:00:03"};
  for (const std::string& mac : macs) {
    Port p;
    p.node_id = n->id;
    p.address = mac;
    REQUIRE(b.nodes().create_port(p, event("port.created")));
  }
  auto in_order = [&](const Node& got) {
    std::vector<std::string> addresses;
    for (const Port& p : got.ports) addresses.push_back(p.address);
    CHECK(addresses == macs);
  };
  auto got = b.nodes().get_node("n1");
  REQUIRE(got);
  in_order(*got);
  auto page = b.nodes().list_nodes({}, ListOptions{10});
  REQUIRE(page);
  REQUIRE(page->size() == 1);
  in_order(page->at(0));
}

TEMPLATE_TEST_CASE("conformance: next_deadline is the earliest deadline from a time on, none when no node has one",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  const int64_t now = b.clock.now_ms();
  auto none = b.nodes().next_deadline(now);
  REQUIRE(none);
  CHECK_FALSE(none->has_value());
  auto mk = [&](const std::string& name, int64_t deadline) {
    Node n = make_node(name, {});
    n.provision_state = deadline > 0 ? ProvisionState::kDeploying : ProvisionState::kAvailable;
    n.deadline_at = deadline;
    REQUIRE(b.nodes().create_node(n, event("node.created")));
  };
  mk("free", 0);
  mk("late", now - 5);
  mk("later", now + 120'000);
  mk("soon", now + 60'000);
  auto at = [&](int64_t from) {
    Result<std::optional<int64_t>> r = b.nodes().next_deadline(from);
    REQUIRE(r);
    return *r;
  };
  CHECK(at(0) == now - 5);  // a node without a deadline (0) is never one
  CHECK(at(now) == now + 60'000);
  CHECK(at(now + 60'000) == now + 60'000);  // from a time on, that time included
  CHECK(at(now + 60'001) == now + 120'000);
  CHECK_FALSE(at(now + 120'001).has_value());
}

TEMPLATE_TEST_CASE("conformance: power_sync_nodes pages every node of the whole ring with the power-sync columns only",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  Node full = full_node();
  full.reservation.clear();  // free and out of enroll: its BMC is read
  auto created = b.nodes().create_node(full, event("node.created"));
  REQUIRE(created);
  Node held = full_node();
  held.name = "held";
  held.ports.clear();
  auto held_created = b.nodes().create_node(held, event("node.created"));
  REQUIRE(held_created);
  Node fresh = full_node();
  fresh.name = "fresh";
  fresh.ports.clear();
  fresh.reservation.clear();
  fresh.provision_state = ProvisionState::kEnroll;
  auto fresh_created = b.nodes().create_node(fresh, event("node.created"));
  REQUIRE(fresh_created);
  std::vector<std::string> ids = {created->id, held_created->id, fresh_created->id};
  for (int i = 0; i < 2; ++i) {
    auto c = b.nodes().create_node(make_node("plain-" + std::to_string(i), {}), event("node.created"));
    REQUIRE(c);
    ids.push_back(c->id);
  }
  std::sort(ids.begin(), ids.end());

  // Pages of two, each after the last node of the one before, in ring
  // position order (ring_conformance_test.cc covers the ranges).
  std::vector<PowerSyncNode> all;
  RingCursor after;
  for (int pages = 0;; ++pages) {
    REQUIRE(pages < 5);
    auto page = b.nodes().power_sync_nodes({kWholeRing}, after, 2);
    REQUIRE(page);
    CHECK(page->size() <= 2);
    for (PowerSyncNode& n : *page) all.push_back(std::move(n));
    if (page->size() < 2) break;
    after = RingCursor::after(all.back());
  }
  std::vector<std::string> got;
  for (const PowerSyncNode& n : all) {
    got.push_back(n.id);
    CHECK(n.ring_position == ring_position(n.id, n.allocation));
  }
  std::sort(got.begin(), got.end());
  CHECK(got == ids);

  const PowerSyncNode* p = nullptr;
  for (const PowerSyncNode& n : all)
    if (n.id == created->id) p = &n;
  REQUIRE(p != nullptr);
  CHECK(p->allocation == full.allocation);
  CHECK(p->provision_state == full.provision_state);
  CHECK(p->reservation == full.reservation);
  CHECK(p->power_state == full.power_state);
  CHECK(p->fault == full.fault);
  CHECK(p->version == created->version);
  CHECK(p->bmc.driver == full.bmc.driver);
  CHECK(p->bmc.address == full.bmc.address);
  CHECK(p->bmc.username == full.bmc.username);
  CHECK(p->bmc.password_sealed == full.bmc.password_sealed);
  CHECK(p->bmc.system_id == full.bmc.system_id);
  CHECK(p->bmc.domain == full.bmc.domain);
  CHECK(p->bmc.verify_tls == full.bmc.verify_tls);
  CHECK(p->bmc.options == full.bmc.options);
  // A node held by an operation, or still in enroll, is skipped by a sweep:
  // its row comes without the BMC.
  for (const PowerSyncNode& n : all) {
    if (n.id == held_created->id) {
      CHECK(n.reservation == held.reservation);
      CHECK(n.bmc.driver.empty());
      CHECK(n.bmc.password_sealed.empty());
    }
    if (n.id == fresh_created->id) {
      CHECK(n.provision_state == ProvisionState::kEnroll);
      CHECK(n.bmc.address.empty());
    }
  }

  auto past_last = b.nodes().power_sync_nodes({kWholeRing}, RingCursor::after(all.back()), 2);
  REQUIRE(past_last);
  CHECK(past_last->empty());
  auto bad = b.nodes().power_sync_nodes({kWholeRing}, RingCursor{}, 0);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Code::kInvalidArgument);
}
