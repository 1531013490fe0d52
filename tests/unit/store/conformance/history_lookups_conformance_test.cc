// Lookups on tables that only grow (every allocation ever made, every
// validation report), and the claim's search of the pool, go through an
// index on both engines, so their cost does not rise with the deployment's
// history or with how many nodes are in use (migration 026_history_lookups).
// The statements are the store's own; what is checked is the engine's plan
// for them (backends.h: query_plan), since a full scan over a test's few rows
// is too fast to tell apart by time.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "backends.h"
#include "controller/store/sql/allocation_rows.h"
#include "controller/store/store_rules.h"

namespace kiln::test {
namespace {

// The engine's plan for `sql` with `params` goes through `index` and reads
// no table whole (backends.h: reads_every_row).
template <typename B>
void check_reads_through(B& b, const std::string& sql, const std::vector<std::string>& params,
                         const std::string& index, const std::string& table) {
  const std::string plan = b.query_plan(sql, params);
  INFO(plan);
  CHECK(plan.find(index) != std::string::npos);
  CHECK_FALSE(B::reads_every_row(plan, table));
}

}  // namespace

TEMPLATE_TEST_CASE("conformance: the next validation report's seq is read from an index, not from every report",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  check_reads_through(b, std::string("SELECT ") + store_rules::kNextValidationSeqSql, {}, "validations_by_seq",
                      "validations");
}

TEMPLATE_TEST_CASE("conformance: an allocation name is looked up through an index, released allocations included",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  for (const std::string tenant : {"", "t1"}) {  // a bare name in any tenant, and "tenant/name"
    INFO("tenant '" << tenant << "'");
    check_reads_through(b, allocation_rows::kAllocationsNamedSql, {"ci-cluster", tenant}, "allocations_by_name",
                        "allocations");
  }
}

TEMPLATE_TEST_CASE("conformance: the allocations in flight are read by state, not by testing every allocation",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  check_reads_through(b, "SELECT id FROM allocations WHERE " + allocation_rows::in_flight_condition(), {},
                      "allocations_state", "allocations");
}

TEMPLATE_TEST_CASE("conformance: a claim reads the claimable nodes through their own index, not every node in use",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  for (bool limited : {true, false}) {  // a count, and a virtual claim's whole pool
    std::vector<std::string> params = {"gpu", "baremetal", "[]", "alloc-1"};
    if (limited) params.push_back("5");
    check_reads_through(b, allocation_rows::claimable_nodes_sql(TestType::kEngine, limited), params,
                        "nodes_claimable", "nodes");
  }
}

TEMPLATE_TEST_CASE("conformance: a claim's quota check counts the tenant's nodes in an index, not the profile's",
                   "[store][conformance]", KILN_STORE_BACKENDS) {
  TestType b;
  check_reads_through(b, allocation_rows::kQuotaAndUseSql, {"acme", "gpu", "baremetal"}, "nodes_by_tenant_profile",
                      "nodes");
}

}  // namespace kiln::test
