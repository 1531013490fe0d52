// The SQLite -> PostgreSQL move (controller/store/store_copy.h): a SQLite
// store with nodes, ports, events, audit, tenants, tokens and agent secrets
// copied into a real PostgreSQL database, read back through PgStore, and the
// counters continuing after the copied numbers.
#include <catch2/catch.hpp>

#include "backends.h"
#include "controller/store/store_copy.h"

using namespace kiln;
using namespace kiln::test;

namespace {

AuditRecord audit(const std::string& path) {
  AuditRecord r;
  r.actor = "tok-1";
  r.actor_name = "ops";
  r.role = "admin";
  r.method = "POST";
  r.path = path;
  r.status = 202;
  return r;
}

}  // namespace

TEST_CASE("store copy: a SQLite fleet moves to PostgreSQL whole, and the counters continue",
          "[store][store_copy]") {
  SqliteBackend src;
  Tenant acme;
  acme.name = "acme";
  acme.display_name = "Acme\tGPU\nlab \\ one";  // COPY's escapes
  REQUIRE(src.tenants().create_tenant(acme));
  TokenRecord tok;
  tok.id = "00000000-0000-4000-8000-000000000001";
  tok.name = "acme-ci";
  tok.role = "tenant";
  tok.tenant = "acme";
  tok.secret_hash = std::string(64, 'a');
  tok.created_at = 1000;
  REQUIRE(src.access().create_token(tok));

  std::vector<Node> made;
  for (int i = 0; i < 5; ++i) {
    Node n = make_node("gpu-" + std::to_string(i), {"52:54:00:00:00:0" + std::to_string(i)});
    if (i == 2) n.tenant = "acme";
    auto c = src.nodes().create_node(n, event("node.created"));
    REQUIRE(c);
    made.push_back(*c);
  }
  // A second port on gpu-0, created after the first: the order must survive
  // (SQLite keeps it as the rowid, PostgreSQL as ports.ord).
  Port extra;
  extra.node_id = made[0].id;
  extra.address = "52:54:00:00:01:00";
  REQUIRE(src.nodes().create_port(extra, event("port.created")));
  auto moved = src.nodes().update_node_if(made[1].id, NodeCondition{}, [](Node& n) {
    n.maintenance = true;
    n.maintenance_reason = "fan";
    n.traits = {"a100", "ib"};
    return ok_status();
  }, {event("node.maintenance")});
  REQUIRE(moved);
  REQUIRE(src.events().append_audit(audit("/v1/nodes")));
  REQUIRE(src.events().append_audit(audit("/v1/nodes/gpu-1/maintenance")));
  REQUIRE(src.agent().set_agent_boot_token(made[3].id, std::string(64, 'b'), "sealed-token"));
  const int64_t last_seq = *src.events().last_event_seq();
  REQUIRE(last_seq == 7);

  PostgresBackend dst;  // an empty, migrated database
  auto report = copy_sqlite_to_postgres(src.dir.file("kiln.db"), dst.conninfo, src.clock);
  REQUIRE(report);
  std::map<std::string, int64_t> rows;
  for (const TableCopied& t : *report) rows[t.table] = t.rows;
  CHECK(rows["nodes"] == 5);
  CHECK(rows["ports"] == 6);
  CHECK(rows["events"] == 7);
  CHECK(rows["audit"] == 2);
  CHECK(rows["tenants"] == 1);
  CHECK(rows["tokens"] == 1);
  CHECK(rows.count("schema_migrations") == 0);
  // Parents before children.
  auto pos = [&](const std::string& t) {
    for (size_t i = 0; i < report->size(); ++i)
      if (report->at(i).table == t) return static_cast<int>(i);
    return -1;
  };
  CHECK(pos("nodes") < pos("ports"));

  // Read back through PgStore: every node as SQLite has it.
  ListOptions all;
  all.limit = 100;
  auto a = src.nodes().list_nodes({}, all);
  auto b = dst.nodes().list_nodes({}, all);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(a->size() == b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    const Node &x = a->at(i), &y = b->at(i);
    CHECK(x.id == y.id);
    CHECK(x.name == y.name);
    CHECK(x.version == y.version);
    CHECK(x.created_at == y.created_at);
    CHECK(x.tenant == y.tenant);
    CHECK(x.maintenance == y.maintenance);
    CHECK(x.maintenance_reason == y.maintenance_reason);
    CHECK(x.traits == y.traits);
    CHECK(x.provision_state == y.provision_state);
    REQUIRE(x.ports.size() == y.ports.size());
    for (size_t p = 0; p < x.ports.size(); ++p) CHECK(x.ports[p].address == y.ports[p].address);
  }
  auto t = dst.tenants().get_tenant("acme");
  REQUIRE(t);
  CHECK(t->display_name == acme.display_name);
  auto found = dst.access().find_token_by_hash(std::string(64, 'a'));
  REQUIRE(found);
  CHECK(found->tenant == "acme");
  auto sealed = dst.agent().agent_boot_token_sealed(made[3].id);
  REQUIRE(sealed);
  REQUIRE(sealed->has_value());
  CHECK(**sealed == "sealed-token");

  // Events: the same numbers, and the next one continues without a gap.
  auto ea = src.events().list_events(0, 100, std::nullopt, std::nullopt);
  auto eb = dst.events().list_events(0, 100, std::nullopt, std::nullopt);
  REQUIRE(ea);
  REQUIRE(eb);
  REQUIRE(ea->size() == eb->size());
  for (size_t i = 0; i < ea->size(); ++i) {
    CHECK(ea->at(i).seq == eb->at(i).seq);
    CHECK(ea->at(i).type == eb->at(i).type);
    CHECK(ea->at(i).node_id == eb->at(i).node_id);
  }
  CHECK(*dst.events().last_event_seq() == last_seq);
  REQUIRE(dst.nodes().create_node(make_node("after-move"), event("node.created")));
  auto next = dst.events().list_events(last_seq, 10, std::nullopt, std::nullopt);
  REQUIRE(next);
  REQUIRE(next->size() == 1);
  CHECK(next->at(0).seq == last_seq + 1);
  // The audit ids continue as well.
  REQUIRE(dst.events().append_audit(audit("/v1/nodes/after-move")));
  auto audits = dst.events().list_audit(0, 10);
  REQUIRE(audits);
  REQUIRE(audits->size() == 3);
  CHECK(audits->at(2).id > audits->at(1).id);
  // A port made after the move comes after the copied ones (ports.ord).
  Port later;
  later.node_id = made[0].id;
  later.address = "52:54:00:00:02:00";
  REQUIRE(dst.nodes().create_port(later, event("port.created")));
  auto g0 = dst.nodes().get_node(made[0].id);
  REQUIRE(g0);
  REQUIRE(g0->ports.size() == 3);
  CHECK(g0->ports[2].address == "52:54:00:00:02:00");

  // A second run finds the target in use and writes nothing.
  auto again = copy_sqlite_to_postgres(src.dir.file("kiln.db"), dst.conninfo, src.clock);
  REQUIRE_FALSE(again);
  CHECK(again.error().code == Code::kInvalidArgument);
  CHECK_THAT(again.error().message, Catch::Contains("not empty"));
  CHECK(*dst.events().last_event_seq() == last_seq + 2);  // the node and the port made after
}

TEST_CASE("store copy: an unreachable PostgreSQL fails without a password in the message", "[store][store_copy]") {
  SqliteBackend src;
  auto r = copy_sqlite_to_postgres(src.dir.file("kiln.db"),
                                   "postgresql://kiln:hunter2@127.0.0.1:1/kiln?connect_timeout=2", src.clock);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnavailable);
  CHECK_THAT(r.error().message, !Catch::Contains("hunter2"));
}
