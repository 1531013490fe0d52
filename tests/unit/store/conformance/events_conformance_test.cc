// EventLog conformance: paging by `since`, the node and tenant filters,
// events that change no node, and the audit log, on both stores.
#include <catch2/catch.hpp>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;

TEMPLATE_TEST_CASE("conformance: events page by since and filter by node and tenant", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  CHECK(*b.events().last_event_seq() == 0);
  Node owned = make_node("owned");
  owned.tenant = "acme";
  auto a = b.nodes().create_node(owned, event("node.created"));
  REQUIRE(a);
  auto c = b.nodes().create_node(make_node("staff"), event("node.created"));
  REQUIRE(c);
  EventDraft lookup = event("agent.lookup");
  lookup.node_id = c->id;
  lookup.detail = {{"mac", "aa:bb"}, {"nested", {{"k", nlohmann::json::array({1, 2})}}}};
  EventDraft free_standing = event("system.started");
  REQUIRE(b.events().append_events({lookup, free_standing}));
  REQUIRE(b.events().append_events({}));  // nothing to append, no seq used

  auto all = b.events().list_events(0, 100, std::nullopt, std::nullopt);
  REQUIRE(all);
  REQUIRE(all->size() == 4);
  for (size_t i = 0; i < all->size(); ++i) CHECK(all->at(i).seq == static_cast<int64_t>(i + 1));
  CHECK(all->at(2).detail == lookup.detail);
  CHECK(all->at(2).ts == b.clock.now_ms());
  CHECK(all->at(3).node_id.empty());
  CHECK(*b.events().last_event_seq() == 4);

  auto page = b.events().list_events(1, 2, std::nullopt, std::nullopt);
  REQUIRE(page);
  REQUIRE(page->size() == 2);
  CHECK(page->at(0).seq == 2);
  CHECK(page->at(1).seq == 3);
  auto of_c = b.events().list_events(0, 100, c->id, std::nullopt);
  REQUIRE(of_c);
  CHECK(of_c->size() == 2);
  auto of_acme = b.events().list_events(0, 100, std::nullopt, std::string("acme"));
  REQUIRE(of_acme);
  REQUIRE(of_acme->size() == 1);
  CHECK(of_acme->at(0).node_id == a->id);
  auto none = b.events().list_events(0, 100, a->id, std::string("other"));
  REQUIRE(none);
  CHECK(none->empty());
  CHECK(b.events().list_events(0, 0, std::nullopt, std::nullopt).error().code == Code::kInvalidArgument);
}

TEMPLATE_TEST_CASE("conformance: the audit log appends and pages by id", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  for (int i = 0; i < 3; ++i) {
    AuditRecord r;
    r.actor = "tok-" + std::to_string(i);
    r.actor_name = "ci";
    r.role = "admin";
    r.method = "POST";
    r.path = "/v1/nodes";
    r.request_id = "req-" + std::to_string(i);
    r.node_id = std::string("x");  // not = "x": a GCC 12 -Wrestrict false positive at -O2
    r.status = 201 + i;
    r.ts = i == 0 ? 0 : 42;  // 0: stamped by the store
    REQUIRE(b.events().append_audit(r));
  }
  auto all = b.events().list_audit(0, 10);
  REQUIRE(all);
  REQUIRE(all->size() == 3);
  CHECK(all->at(0).ts == b.clock.now_ms());
  CHECK(all->at(1).ts == 42);
  CHECK(all->at(2).actor == "tok-2");
  CHECK(all->at(2).status == 203);
  CHECK(all->at(2).path == "/v1/nodes");
  CHECK(all->at(2).node_id == "x");
  CHECK(all->at(2).request_id == "req-2");
  auto rest = b.events().list_audit(all->at(0).id, 10);
  REQUIRE(rest);
  CHECK(rest->size() == 2);
  CHECK(b.events().list_audit(0, -1).error().code == Code::kInvalidArgument);
  CHECK(*b.events().last_event_seq() == 0);  // audit is not the event log
}

TEMPLATE_TEST_CASE("conformance: both dialects record the same migrations", "[store][conformance]",
                   KILN_STORE_BACKENDS) {
  TestType b;
  auto names = b.applied_migrations();
  REQUIRE(names);
  // The dialects keep one list of names, so a database of either kind says
  // which schema version it is at in the same words.
  CHECK(*names == std::vector<std::string>{"001_initial", "002_images", "003_agent", "004_profiles_validations",
                                            "010_hosts", "011_agent_trust", "012_tenants", "013_allocations",
                                            "014_addresses", "015_key_check", "016_conductors",
                                            "017_agent_commands", "018_ssh_host_keys",
                                            "019_image_conversion", "020_address_source",
                                            "021_image_os_agent", "022_ironic_fields", "023_member_order",
                                            "024_event_queue", "025_ring_position", "026_history_lookups",
                                            "027_publish_in_writer"});
}
