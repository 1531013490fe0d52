// The guarantees several writers rely on, on both stores: the reservation is
// taken by exactly one of N racers (also when they come through two store
// handles, as two kilnd on one database would), no conditional increment is
// lost, and event seqs are gap-free and read back in order by `since` while
// writers are still committing.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;

TEMPLATE_TEST_CASE("conformance: one of 8 racers on two store handles takes a free reservation",
                   "[store][conformance][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto second = b.open_another();
  NodeRepo* handles[2] = {&b.nodes(), second.get()};
  constexpr int kNodes = 20, kRacers = 8;
  std::vector<std::string> ids;
  for (int i = 0; i < kNodes; ++i) {
    auto n = b.nodes().create_node(make_node("n" + std::to_string(i)), event("node.created"));
    REQUIRE(n);
    ids.push_back(n->id);
  }
  std::vector<std::vector<std::string>> winners(kNodes);
  std::mutex mu;
  std::atomic<int> other_errors{0};
  std::vector<std::thread> racers;
  for (int r = 0; r < kRacers; ++r) {
    racers.emplace_back([&, r] {
      const std::string op = "op-" + std::to_string(r);
      for (int i = 0; i < kNodes; ++i) {
        auto got = handles[r % 2]->update_node_if(
            ids[i], NodeCondition{.reservation = ""},
            [&](Node& n) { n.reservation = op; return ok_status(); }, {event("reserved")});
        if (got) {
          std::lock_guard<std::mutex> l(mu);
          winners[i].push_back(op);
        } else if (got.error().code != Code::kConflict) {
          ++other_errors;
        }
      }
    });
  }
  for (auto& t : racers) t.join();
  CHECK(other_errors == 0);
  for (int i = 0; i < kNodes; ++i) {
    INFO("node " << i);
    REQUIRE(winners[i].size() == 1);
    auto n = b.nodes().get_node(ids[i]);
    REQUIRE(n);
    CHECK(n->reservation == winners[i][0]);
    CHECK(n->version == 2);
  }
  // One event per taken reservation, none for the losers.
  auto evs = b.events().list_events(kNodes, 1000, std::nullopt, std::nullopt);
  REQUIRE(evs);
  CHECK(evs->size() == static_cast<size_t>(kNodes));
}

TEMPLATE_TEST_CASE("conformance: 6 writers x 40 unconditional increments lose none, events gap-free",
                   "[store][conformance][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  auto node = b.nodes().create_node(make_node("counter"), event("node.created"));
  REQUIRE(node);
  for (int i = 0; i < 5; ++i) REQUIRE(b.nodes().create_node(make_node("o" + std::to_string(i)), event("x")));

  std::mutex seen_mu;
  std::vector<int64_t> seen;
  b.events().set_event_listener([&](int64_t seq) {
    std::lock_guard<std::mutex> l(seen_mu);
    seen.push_back(seq);
  });

  constexpr int kWriters = 6, kIncrements = 40;
  std::atomic<bool> done{false};
  std::atomic<int> errors{0}, out_of_order{0};
  std::mutex error_mu;
  std::string first_error;
  // A follower reads events by `since` while the writers commit, as the SSE
  // stream does: what it sees must be contiguous (no seq skipped and later
  // found behind it).
  std::vector<int64_t> followed;
  std::thread follower([&] {
    int64_t since = 0;
    auto drain = [&] {
      auto page = b.events().list_events(since, 500, std::nullopt, std::nullopt);
      if (!page) {
        ++errors;
        return;
      }
      for (const EventRecord& e : *page) {
        if (e.seq != since + 1) ++out_of_order;
        since = e.seq;
        followed.push_back(e.seq);
      }
    };
    while (!done.load()) drain();
    drain();
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        auto r = b.nodes().update_node_if(
            "counter", {},
            [](Node& n) {
              n.deadline_at += 1;
              return ok_status();
            },
            {event("tick")});
        if (!r) {
          ++errors;
          std::lock_guard<std::mutex> l(error_mu);
          if (first_error.empty()) first_error = r.error().message;
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  follower.join();

  INFO("first error: " << first_error);
  CHECK(errors == 0);
  CHECK(out_of_order == 0);
  auto n = b.nodes().get_node("counter");
  REQUIRE(n);
  CHECK(n->deadline_at == kWriters * kIncrements);
  CHECK(n->version == 1 + kWriters * kIncrements);

  const int64_t total = 6 + kWriters * kIncrements;
  auto last = b.events().last_event_seq();
  REQUIRE(last);
  CHECK(*last == total);
  CHECK(static_cast<int64_t>(followed.size()) == total);
  auto all = b.events().list_events(0, 1000, std::nullopt, std::nullopt);
  REQUIRE(all);
  REQUIRE(static_cast<int64_t>(all->size()) == total);
  for (int64_t i = 0; i < total; ++i) CHECK(all->at(static_cast<size_t>(i)).seq == i + 1);
  // The listener heard about the last event and never went backwards.
  std::lock_guard<std::mutex> l(seen_mu);
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.back() == total);
  CHECK(std::is_sorted(seen.begin(), seen.end()));
}
