// The write generation (NodeStore::write_generation, NodeStore::
// database_generation; controller/store/store.h) on SQLite and PostgreSQL
// (backends.h): what the API's read cache and token cache tag their answers
// with. Reads leave it alone; every kind of write those answers depend on
// (nodes, ports, tokens, allocations) moves it before its call returns. On
// PostgreSQL, where other instances write too, so do their commits, and a
// transaction that was running when it was read moves it when it commits.
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "backends.h"
#include "common/ids.h"
#include "controller/store/pg/connection.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// The generation as the API reads it: the store's counter where it keeps
// one in memory (SQLite), else one read from the database (PostgreSQL).
WriteGeneration generation(NodeStore& s) {
  if (std::optional<uint64_t> counter = s.write_generation()) return WriteGeneration{*counter, {}};
  REQUIRE(s.has_database_generation());
  Result<WriteGeneration> read = s.database_generation();
  REQUIRE(read);
  return *read;
}

// Checks that `write` moved the generation forward (a different value, not
// an older order) and returns the new one.
template <typename F>
WriteGeneration moved_by(NodeStore& s, const WriteGeneration& before, const char* what, F write) {
  write();
  WriteGeneration after = generation(s);
  INFO(what << ": " << before.order << " [" << before.snapshot << "] -> " << after.order << " ["
            << after.snapshot << "]");
  CHECK_FALSE(after == before);
  CHECK(after.order >= before.order);
  return after;
}

Allocation one_node_request(const std::string& tenant) {
  Allocation a;
  a.id = new_uuid();
  a.name = "gen";
  a.tenant = tenant;
  a.profile = "gpu";
  a.kind = NodeKind::kBaremetal;
  a.count = 1;
  a.image = "img";
  a.state = AllocationState::kPending;
  return a;
}

}  // namespace

TEMPLATE_TEST_CASE("conformance: write generation: reads leave it, every write a cached read depends on moves it",
                   "[store][conformance][generation]", KILN_STORE_BACKENDS) {
  TestType b;
  NodeStore& s = *b.store;
  REQUIRE(b.tenants().create_tenant(Tenant{"acme", "", {{"gpu", NodeKind::kBaremetal, 5}}, 0, 0, 0}));
  WriteGeneration g = generation(s);

  Node n = make_node("gen-a");
  n.provision_state = ProvisionState::kAvailable;
  n.profile = "gpu";
  std::string id;
  g = moved_by(s, g, "create_node", [&] {
    Result<Node> made = s.create_node(n, event("node.created"));
    REQUIRE(made);
    id = made->id;
  });
  std::string port_id;
  g = moved_by(s, g, "create_port", [&] {
    Result<Port> p = s.create_port(Port{"", id, "52:54:00:aa:bb:01", true, 0}, event("port.created"));
    REQUIRE(p);
    port_id = p->id;
  });
  const std::string hash(64, 'd');
  std::string token_id;
  g = moved_by(s, g, "create_token", [&] {
    Result<TokenRecord> t = s.create_token(TokenRecord{"", "gen", "operator", "", hash, 0, 0});
    REQUIRE(t);
    token_id = t->id;
  });
  std::string allocation_id;
  g = moved_by(s, g, "create_allocation", [&] {
    Result<Allocation> a = s.create_allocation(one_node_request("acme"), {event("allocation.created")}, nullptr);
    REQUIRE(a);
    allocation_id = a->id;
  });

  // What the cached routes and the token lookup read, twice: nothing moves.
  for (int pass = 0; pass < 2; ++pass) {
    REQUIRE(s.get_node(id));
    REQUIRE(s.list_nodes(NodeFilter{}, ListOptions{}));
    REQUIRE(s.list_ports(id, 10, ""));
    REQUIRE(s.find_token_by_hash(hash));
    REQUIRE(s.get_allocation(allocation_id, ""));
    REQUIRE(s.list_allocations(AllocationFilter{}));
    CHECK(generation(s) == g);
  }

  g = moved_by(s, g, "update_node_if", [&] {
    REQUIRE(s.update_node_if(id, NodeCondition{}, [](Node& m) {
      m.last_error = "moved";
      return ok_status();
    }, {}));
  });
  g = moved_by(s, g, "update_allocation_if", [&] {
    REQUIRE(s.update_allocation_if(allocation_id, std::nullopt, [](Allocation& a) {
      a.state = AllocationState::kProvisioning;
      return ok_status();
    }, {}));
  });
  g = moved_by(s, g, "delete_port", [&] { REQUIRE(s.delete_port(port_id, event("port.deleted"))); });
  g = moved_by(s, g, "delete_token", [&] { REQUIRE(s.delete_token(token_id)); });
  CHECK(generation(s) == g);
}

// PostgreSQL's generation is the database's snapshot, so it answers for
// every writer of the database, not only this store: what makes answers
// cached by one kilnd safe while others write.
TEST_CASE("conformance: PostgreSQL generation: another instance's commit moves it, a transaction running when it was read moves it when it commits",
          "[store][conformance][generation]") {
  PostgresBackend b;
  NodeStore& s = *b.store;
  CHECK_FALSE(s.write_generation());  // other instances write too: nothing in memory answers for them
  REQUIRE(s.has_database_generation());
  Result<Node> made = s.create_node(make_node("shared"), event("node.created"));
  REQUIRE(made);
  const std::string id = made->id;
  WriteGeneration g = generation(s);
  CHECK(g.snapshot.find(':') != std::string::npos);  // xmin:xmax:xip-list
  CHECK(g.order > 0);

  // Another kilnd's store: its reads leave the generation, its writes move it.
  std::unique_ptr<PgStore> other = b.open_another();
  REQUIRE(other->get_node(id));
  REQUIRE(other->list_nodes(NodeFilter{}, ListOptions{}));
  CHECK(generation(s) == g);
  g = moved_by(s, g, "another store's update_node_if", [&] {
    REQUIRE(other->update_node_if(id, NodeCondition{}, [](Node& m) {
      m.last_error = "written elsewhere";
      return ok_status();
    }, {}));
  });
  CHECK(s.get_node(id)->last_error == "written elsewhere");
  g = moved_by(s, g, "another store's create_token", [&] {
    REQUIRE(other->create_token(TokenRecord{"", "elsewhere", "operator", "", std::string(64, 'e'), 0, 0}));
  });

  // A transaction that has written but not committed when the generation is
  // read: the generation stays while it runs, and moves when it commits.
  Result<std::unique_ptr<pg::Connection>> raw = pg::Connection::open(b.conninfo);
  REQUIRE(raw);
  pg::Connection& c = **raw;
  REQUIRE(c.exec("BEGIN"));
  REQUIRE(c.exec("UPDATE nodes SET last_error = 'from a long transaction' WHERE id = $1", pg::Params().add(id)));
  const WriteGeneration during = generation(s);
  CHECK(generation(s) == during);
  CHECK(s.get_node(id)->last_error == "written elsewhere");  // not committed yet
  CHECK(generation(s) == during);
  moved_by(s, during, "a commit of a transaction running at the read", [&] { REQUIRE(c.exec("COMMIT")); });
  CHECK(s.get_node(id)->last_error == "from a long transaction");
  g = generation(s);

  // Reads in a transaction of their own, and an idle publish of events (each
  // instance's listening thread runs one every poll interval), leave it.
  REQUIRE(c.exec("BEGIN"));
  REQUIRE(c.exec("SELECT count(*) FROM nodes"));
  REQUIRE(c.exec("COMMIT"));
  REQUIRE(c.exec("SELECT kiln_publish_events()"));
  CHECK(generation(s) == g);

  // A conductor heartbeat is a commit like any other: it moves the
  // generation (so every kilnd's kept answers end at each heartbeat of any
  // of them), which costs hits, never freshness.
  Result<ConductorRecord> me = s.register_conductor(ConductorRecord{.id = new_uuid(), .host = "gen-test"});
  REQUIRE(me);
  g = generation(s);
  moved_by(s, g, "heartbeat_conductor", [&] { REQUIRE(s.heartbeat_conductor(me->id)); });
}
