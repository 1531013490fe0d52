// Many threads on one store: optimistic version retries lose no increment, and
// the reservation column works as a lock (exactly one of N racers takes it).
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>

#include "store_test_util.h"

using namespace kiln;
using namespace kiln::test;

TEST_CASE("8 writers x 200 version-conditioned increments, readers alongside", "[store][concurrency]") {
  StoreFixture f;
  auto node = f.store->create_node(make_node("counter", {"aa:00:00:00:00:01"}), event("node.created"));
  REQUIRE(node);
  for (int i = 0; i < 20; ++i) REQUIRE(f.store->create_node(make_node("other-" + std::to_string(i)), event("node.created")));
  int64_t events_before = count_events(f.path);

  std::mutex seen_mu;
  std::vector<int64_t> seen;
  f.store->set_event_listener([&](int64_t seq) {
    std::lock_guard<std::mutex> l(seen_mu);
    seen.push_back(seq);
  });

  constexpr int kWriters = 8, kIncrements = 200;
  std::atomic<bool> done{false};
  std::atomic<int> retries{0}, reader_errors{0}, torn_reads{0}, reads{0};
  std::vector<std::string> writer_errors(kWriters);

  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!done.load()) {
        auto page = f.store->list_nodes({}, ListOptions{50, "", "updated_at", true});
        auto one = f.store->get_node("counter");
        if (!page || !one) {
          ++reader_errors;
          continue;
        }
        // A reader never sees a half-written node: version and counter move together.
        int64_t counter = one->bmc.options.value("counter", 0);
        if (one->version != counter + 1 || one->ports.size() != 1) ++torn_reads;
        ++reads;
      }
    });
  }

  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kIncrements; ++i) {
        for (;;) {
          auto cur = f.store->get_node(node->id);
          if (!cur) {
            writer_errors[w] = cur.error().message;
            return;
          }
          EventDraft e = event("counter.incremented");
          e.detail = {{"writer", w}};
          auto r = f.store->update_node_if(
              node->id, NodeCondition{cur->version, {}, {}},
              [](Node& n) {
                n.bmc.options["counter"] = n.bmc.options.value("counter", 0) + 1;
                return ok_status();
              },
              {e});
          if (r) break;
          if (r.error().code != Code::kPreconditionFailed) {
            writer_errors[w] = r.error().message;
            return;
          }
          ++retries;
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  for (auto& t : readers) t.join();

  for (const auto& e : writer_errors) CHECK(e.empty());
  CHECK(reader_errors == 0);
  CHECK(torn_reads == 0);
  CHECK(reads > 0);
  auto final_node = f.store->get_node(node->id);
  REQUIRE(final_node);
  CHECK(final_node->bmc.options.value("counter", 0) == kWriters * kIncrements);
  CHECK(final_node->version == 1 + kWriters * kIncrements);
  CHECK(count_events(f.path) == events_before + kWriters * kIncrements);
  CHECK(sql_int(f.path, "SELECT count(*) FROM events WHERE node_id = '" + node->id + "'") ==
        1 + kWriters * kIncrements);
  REQUIRE(seen.size() == static_cast<size_t>(kWriters * kIncrements));
  for (size_t i = 1; i < seen.size(); ++i) REQUIRE(seen[i] > seen[i - 1]);
  INFO("retries on 412: " << retries.load() << ", reads: " << reads.load());
  SUCCEED();
}

TEST_CASE("reservation as a lock: exactly one of 8 racers wins", "[store][concurrency]") {
  StoreFixture f;
  REQUIRE(f.store->create_node(make_node("free"), event("node.created")));

  constexpr int kRacers = 8;
  for (int round = 0; round < 10; ++round) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<Result<Node>> results(kRacers, Error(Code::kInternal, "not run"));
    std::vector<std::thread> threads;
    for (int i = 0; i < kRacers; ++i) {
      threads.emplace_back([&, i] {
        ++ready;
        while (!go.load()) std::this_thread::yield();
        std::string op = "op-" + std::to_string(round) + "-" + std::to_string(i);
        results[i] = f.store->update_node_if(
            "free", NodeCondition{{}, std::string(""), {}},
            [&](Node& n) {
              n.reservation = op;
              return ok_status();
            },
            {event("node.reserved")});
      });
    }
    while (ready.load() < kRacers) std::this_thread::yield();
    go = true;
    for (auto& t : threads) t.join();

    int wins = 0;
    std::string winner;
    for (int i = 0; i < kRacers; ++i) {
      if (results[i]) {
        ++wins;
        winner = results[i]->reservation;
      } else {
        CHECK(results[i].error().code == Code::kConflict);
        CHECK(results[i].error().message.rfind("node is busy: locked by operation op-", 0) == 0);
      }
    }
    REQUIRE(wins == 1);
    auto n = f.store->get_node("free");
    REQUIRE(n);
    CHECK(n->reservation == winner);
    // Release, held by the winner only.
    REQUIRE(f.store->update_node_if(
        "free", NodeCondition{{}, winner, {}}, [](Node& x) { x.reservation.clear(); return ok_status(); },
        {event("node.released")}));
  }
  CHECK(f.store->get_node("free")->version == 1 + 10 * 2);
}
