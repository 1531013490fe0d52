// TenantStore conformance: tenants, quotas, usage and the delete guards, on
// SQLite and PostgreSQL (backends.h).
#include <catch2/catch.hpp>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;

TEMPLATE_TEST_CASE("conformance: tenants: create, quotas, replace by version, usage, delete guards",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  TenantStore& s = b.tenants();
  Tenant acme{"acme", "ACME Corp", {{"h100", NodeKind::kVirtual, 2}, {"h100", NodeKind::kBaremetal, 4}}, 0, 0, 0};
  auto created = s.create_tenant(acme);
  REQUIRE(created);
  CHECK(created->version == 1);
  CHECK(created->created_at == b.clock.now_ms());
  REQUIRE(s.create_tenant(Tenant{"zeta", "", {}, 0, 0, 0}));

  auto dup = s.create_tenant(acme);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == Code::kConflict);
  CHECK(dup.error().fields.at(0).field == "/name");
  auto two_quotas = s.create_tenant(Tenant{"beta", "", {{"a100", NodeKind::kBaremetal, 1}, {"a100", NodeKind::kBaremetal, 2}}, 0, 0, 0});
  REQUIRE_FALSE(two_quotas);
  CHECK(two_quotas.error().fields.at(0).field == "/quotas/1");
  CHECK(s.get_tenant("beta").error().code == Code::kNotFound);  // nothing of it was written

  auto got = s.get_tenant("acme");
  REQUIRE(got);
  CHECK(got->display_name == "ACME Corp");
  REQUIRE(got->quotas.size() == 2);
  CHECK(got->quotas[0].kind == NodeKind::kBaremetal);  // sorted by (profile, kind)
  CHECK(got->quotas[0].max_nodes == 4);
  auto all = s.list_tenants();
  REQUIRE(all);
  REQUIRE(all->size() == 2);
  CHECK(all->at(0).name == "acme");
  CHECK(all->at(0).quotas.size() == 2);

  b.clock.advance_ms(5);
  Tenant changed = *got;
  changed.display_name = "ACME";
  changed.quotas = {{"a100", NodeKind::kBaremetal, 8}};
  auto replaced = s.replace_tenant(changed, 1);
  REQUIRE(replaced);
  CHECK(replaced->version == 2);
  CHECK(replaced->created_at == created->created_at);
  CHECK(replaced->updated_at == b.clock.now_ms());
  auto stale = s.replace_tenant(changed, 1);
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == Code::kPreconditionFailed);
  CHECK(s.replace_tenant(Tenant{"ghost", "", {}, 0, 0, 0}, 1).error().code == Code::kNotFound);
  got = s.get_tenant("acme");
  REQUIRE(got);
  CHECK(got->display_name == "ACME");
  REQUIRE(got->quotas.size() == 1);
  CHECK(got->quotas[0].profile == "a100");

  // Usage counts the nodes assigned to the tenant, per (profile, kind).
  for (int i = 0; i < 3; ++i) {
    Node n = make_node("n" + std::to_string(i));
    n.profile = "a100";
    n.tenant = i < 2 ? "acme" : "zeta";
    REQUIRE(b.nodes().create_node(n, event("node.created")));
  }
  auto usage = s.tenant_usage("acme");
  REQUIRE(usage);
  CHECK(usage->at({"a100", NodeKind::kBaremetal}) == 2);
  auto every = s.usage_by_tenant();
  REQUIRE(every);
  CHECK(every->size() == 2);
  CHECK(every->at("zeta").at({"a100", NodeKind::kBaremetal}) == 1);

  // A tenant holding nodes cannot go; once they are released it goes with
  // its tenant tokens, and only them.
  auto held = s.delete_tenant("acme");
  REQUIRE_FALSE(held);
  CHECK(held.error().code == Code::kConflict);
  for (const char* name : {"n0", "n1"})
    REQUIRE(b.nodes().update_node_if(name, {}, [](Node& n) { n.tenant.clear(); return ok_status(); }, {}));
  REQUIRE(b.access().create_token(TokenRecord{"", "acme-ci", "tenant", "acme", std::string(64, 'a'), 0, 0}));
  REQUIRE(b.access().create_token(TokenRecord{"", "ops", "operator", "", std::string(64, 'b'), 0, 0}));
  REQUIRE(s.delete_tenant("acme"));
  CHECK(s.get_tenant("acme").error().code == Code::kNotFound);
  CHECK(s.delete_tenant("acme").error().code == Code::kNotFound);
  auto tokens = b.access().list_tokens();
  REQUIRE(tokens);
  REQUIRE(tokens->size() == 1);
  CHECK(tokens->at(0).name == "ops");
}

TEMPLATE_TEST_CASE("conformance: tenants: byte order, a refused replace changes nothing, updated_at never goes back",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  TenantStore& s = b.tenants();
  // Byte order whatever the database's collation: upper case before lower,
  // "-" before digits.
  REQUIRE(s.create_tenant(Tenant{"beta", "", {}, 0, 0, 0}));
  REQUIRE(s.create_tenant(Tenant{"Zulu", "", {}, 0, 0, 0}));
  const std::vector<TenantQuota> shuffled{
      {"b100", NodeKind::kVirtual, 1}, {"a100", NodeKind::kVirtual, 1}, {"a-100", NodeKind::kBaremetal, 1}, {"B100", NodeKind::kVirtual, 1},
      {"a100", NodeKind::kBaremetal, 1}};
  REQUIRE(s.create_tenant(Tenant{"alpha", "", shuffled, 0, 0, 0}));
  auto all = s.list_tenants();
  REQUIRE(all);
  std::vector<std::string> names;
  for (const Tenant& t : *all) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"Zulu", "alpha", "beta"});
  auto alpha = s.get_tenant("alpha");
  REQUIRE(alpha);
  std::vector<std::string> quotas;
  for (const TenantQuota& q : alpha->quotas) quotas.push_back(q.profile + "/" + std::string(to_string(q.kind)));
  CHECK(quotas == std::vector<std::string>{"B100/virtual", "a-100/baremetal", "a100/baremetal", "a100/virtual",
                                           "b100/virtual"});
  CHECK(all->at(1).quotas.size() == 5);
  CHECK(all->at(0).quotas.empty());

  // Two quotas for one (profile, kind) refuse the whole replace.
  b.clock.advance_ms(5);
  Tenant twice = *alpha;
  twice.display_name = "Alpha";
  twice.quotas = {{"h100", NodeKind::kVirtual, 1}, {"h100", NodeKind::kVirtual, 2}};
  auto refused = s.replace_tenant(twice, 1);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Code::kConflict);
  CHECK(refused.error().fields.at(0).field == "/quotas/1");
  auto kept = s.get_tenant("alpha");
  REQUIRE(kept);
  CHECK(kept->version == 1);
  CHECK(kept->display_name.empty());
  CHECK(kept->updated_at == alpha->updated_at);
  CHECK(kept->quotas.size() == 5);

  // A writer whose clock is behind the last one's (another instance, or a
  // clock stepped back) still moves the version, never updated_at back.
  b.clock.advance_ms(100);
  auto ahead = s.replace_tenant(Tenant{"beta", "B", {}, 0, 0, 0}, 1);
  REQUIRE(ahead);
  b.clock.advance_ms(-50);
  auto behind = s.replace_tenant(Tenant{"beta", "B2", {}, 0, 0, 0}, 2);
  REQUIRE(behind);
  CHECK(behind->version == 3);
  CHECK(behind->updated_at == ahead->updated_at);
  CHECK(s.get_tenant("beta")->updated_at == ahead->updated_at);
}
