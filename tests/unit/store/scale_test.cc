// 100k nodes: list pages must stay fast at any depth (keyset pagination on
// indexes). Hidden by default ([.slow]); run with
//   build/store/tests/unit/store/store_test "[.slow]"
// KILN_SCALE_NODES=N overrides the node count (for a quick look).
#include <catch2/catch.hpp>

#include <cstdlib>

#include <chrono>
#include <iostream>

#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

namespace {
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

TEST_CASE("100k nodes: list pagination stays fast", "[.slow][store][scale]") {
  const char* env = std::getenv("KILN_SCALE_NODES");
  const int kNodes = env != nullptr ? std::max(1000, std::atoi(env)) : 100'000;
  TempDir dir;
  FakeClock clock;
  std::string path = dir.file("kiln.db");
  auto store = open_migrated(path, &clock);

  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kNodes; ++i) {
    if (i % 3 == 0) clock.advance_ms(1);
    Node n = make_node("node-" + std::to_string(i), {});
    n.ports.push_back(Port{"", "", "aa:" + std::to_string(i), true, 0});
    n.provision_state = i % 10 == 0 ? ProvisionState::kAvailable : ProvisionState::kActive;
    n.profile = i % 2 == 0 ? "h100" : "a100";
    n.tenant = i % 50 == 0 ? "acme" : "";
    auto r = store->create_node(n, event("node.created"));
    REQUIRE(r);
  }
  double insert_ms = ms_since(t0);

  auto timed_page = [&](const NodeFilter& filter, const ListOptions& o) {
    auto t = std::chrono::steady_clock::now();
    auto page = store->list_nodes(filter, o);
    double ms = ms_since(t);
    REQUIRE(page);
    return std::make_pair(ms, std::move(*page));
  };

  // Full walk, 100 per page.
  auto walk_start = std::chrono::steady_clock::now();
  ListOptions o{100, "", "created_at", false};
  int pages = 0, seen = 0;
  double worst = 0;
  for (;;) {
    auto [ms, page] = timed_page({}, o);
    worst = std::max(worst, ms);
    ++pages;
    seen += static_cast<int>(page.size());
    if (page.size() < 100) break;
    o.marker = page.back().id;
  }
  double walk_ms = ms_since(walk_start);
  CHECK(seen == kNodes);

  // Deep pages for other sorts and filters.
  auto first = store->list_nodes({}, ListOptions{1, "", "id", false});
  REQUIRE(first);
  std::string mid_marker = (*store->list_nodes({}, ListOptions{kNodes / 2, "", "name", true})).back().id;
  auto [name_ms, name_page] = timed_page({}, ListOptions{100, mid_marker, "name", true});
  auto [state_ms, state_page] =
      timed_page(NodeFilter{ProvisionState::kAvailable, {}, {}, {}, {}}, ListOptions{100, "", "created_at", true});
  auto [tenant_ms, tenant_page] =
      timed_page(NodeFilter{{}, {}, {}, {}, std::string("acme")}, ListOptions{100, "", "created_at", false});
  auto [psort_ms, psort_page] = timed_page({}, ListOptions{100, mid_marker, "provision_state", false});
  CHECK(name_page.size() == 100);
  CHECK(state_page.size() == 100);
  CHECK(tenant_page.size() == static_cast<size_t>(std::min(100, (kNodes + 49) / 50)));
  CHECK(psort_page.size() == 100);

  auto tg = std::chrono::steady_clock::now();
  for (int i = 0; i < 1000; ++i) REQUIRE(store->get_node("node-" + std::to_string((i * 97) % kNodes)));
  double get_ms = ms_since(tg) / 1000;
  auto tc = std::chrono::steady_clock::now();
  auto counts = store->count_nodes_by_state();
  double count_ms = ms_since(tc);
  REQUIRE(counts);
  CHECK(counts->at("available") == (kNodes + 9) / 10);

  std::cout << kNodes << " nodes: insert " << insert_ms / 1000 << " s (" << kNodes / (insert_ms / 1000)
            << " creates/s); full walk " << pages << " pages of 100 in " << walk_ms << " ms (mean "
            << walk_ms / pages << " ms, worst " << worst << " ms); deep page by name desc " << name_ms
            << " ms; state filter " << state_ms << " ms; tenant filter " << tenant_ms
            << " ms; by provision_state deep " << psort_ms << " ms; get_node by name " << get_ms
            << " ms; count_nodes_by_state " << count_ms << " ms\n";
  // Generous bounds (Debug, sanitizers and a loaded machine must pass): a lost
  // index turns a deep page into a scan and sort of all 100k rows, several
  // times slower than a keyset page, which reads about 100 index entries.
  CHECK(worst < 250.0);
  CHECK(name_ms < 250.0);
  CHECK(state_ms < 250.0);
  CHECK(psort_ms < 250.0);
}
