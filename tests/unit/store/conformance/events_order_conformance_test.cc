// EventLog conformance under concurrent writers: what a follower paging by
// `since` (the API's /v1/events and its event stream) is promised while
// several store handles (several kilnd on one database) append events at
// once. On PostgreSQL every transaction that writes event rows pauses at
// random before its commit (PostgresBackend::delay_event_commits), so
// writers commit in an order unrelated to the order they wrote in: a store
// that numbered events as they were written (a plain SEQUENCE) would let a
// follower see seq 8, then have seq 7 commit behind it, and this case fails
// on the "appeared below" or "seen by the follower" checks.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "backends.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Which writer wrote an event, in which of its calls, and its place in that
// call: the identity the follower checks "exactly once" by.
using Mark = std::tuple<int, int, int>;

Mark mark_of(const EventRecord& e) {
  return {e.detail.value("writer", -1), e.detail.value("call", -1), e.detail.value("k", -1)};
}

}  // namespace

TEMPLATE_TEST_CASE("conformance: a follower of events by since sees every event once and in order under "
                   "concurrent writers whose commits are delayed at random",
                   "[store][conformance][concurrency]", KILN_STORE_BACKENDS) {
  TestType b;
  constexpr int kHandles = 3, kWriters = 6, kCalls = 40;
  // Three handles on one database, as three kilnd.
  std::vector<EventLog*> logs = {&b.events()};
  std::vector<NodeRepo*> repos = {&b.nodes()};
  std::vector<decltype(b.open_another())> others;
  for (int h = 1; h < kHandles; ++h) {
    others.push_back(b.open_another());
    logs.push_back(others.back().get());
    repos.push_back(others.back().get());
  }
  std::vector<std::string> node_ids;
  for (int w = 0; w < kWriters; ++w) {
    auto n = b.nodes().create_node(make_node("writer-" + std::to_string(w)), event("node.created"));
    REQUIRE(n);
    node_ids.push_back(n->id);
  }
  const int64_t before = *b.events().last_event_seq();
  b.delay_event_commits();

  std::atomic<bool> done{false};
  std::atomic<int> write_errors{0};
  std::mutex error_mu;
  std::string first_error;
  auto failed = [&](const Error& e) {
    ++write_errors;
    std::lock_guard<std::mutex> l(error_mu);
    if (first_error.empty()) first_error = e.message;
  };

  // The follower: pages by since with a small limit, as a client catching up
  // does, and after every page looks behind what it has seen for an event it
  // has not (one that committed after a higher seq was already visible).
  std::vector<EventRecord> followed;
  std::set<int64_t> seen_seqs;
  int read_errors = 0, backwards = 0, appeared_below = 0, pages = 0;
  std::thread follower([&] {
    int64_t since = before;
    auto poll = [&] {
      auto page = logs[pages % kHandles]->list_events(since, 7, std::nullopt, std::nullopt);
      ++pages;
      if (!page) {
        ++read_errors;
        return;
      }
      for (const EventRecord& e : *page) {
        if (e.seq <= since) ++backwards;
        since = e.seq;
        seen_seqs.insert(e.seq);
        followed.push_back(e);
      }
      auto behind = logs[0]->list_events(std::max(before, since - 40), 40, std::nullopt, std::nullopt);
      if (!behind) {
        ++read_errors;
        return;
      }
      for (const EventRecord& e : *behind)
        if (e.seq <= since && !seen_seqs.count(e.seq)) ++appeared_below;
    };
    while (!done.load()) poll();
    for (int i = 0; i < 1000; ++i) {  // drain what the last commits left: at most kWriters * kCalls * 2 events
      size_t had = followed.size();
      poll();
      if (followed.size() == had) break;
    }
  });

  // The writers: each its own node and handle; odd calls change the node with
  // one event, even calls append two events that change no node. A random
  // pause inside the node change widens the race further.
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937 rng(static_cast<unsigned>(w) * 7919u + 1u);
      std::uniform_int_distribution<int> pause_us(0, 2000);
      auto draft = [&](int call, int k) {
        EventDraft e = event("test.order");
        e.detail = {{"writer", w}, {"call", call}, {"k", k}};
        return e;
      };
      for (int call = 0; call < kCalls; ++call) {
        const int handle = (w + call) % kHandles;
        if (call % 2 == 1) {
          const int pause = pause_us(rng);
          auto r = repos[handle]->update_node_if(
              node_ids[w], {},
              [&](Node& n) {
                std::this_thread::sleep_for(std::chrono::microseconds(pause));
                n.deadline_at += 1;
                return ok_status();
              },
              {draft(call, 0)});
          if (!r) failed(r.error());
        } else {
          Status s = logs[handle]->append_events({draft(call, 0), draft(call, 1)});
          if (!s) failed(s.error());
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  done = true;
  follower.join();

  INFO("first write error: " << first_error << "; pages read: " << pages);
  REQUIRE(write_errors == 0);
  CHECK(read_errors == 0);
  CHECK(backwards == 0);
  CHECK(appeared_below == 0);

  // Every event written, seen once, with seqs before+1, before+2, ... (no
  // hole, no repeat), each writer's events in the order it wrote them.
  const size_t expected = kWriters * (kCalls / 2) * 3;
  auto all = b.events().list_events(before, 1000, std::nullopt, std::nullopt);
  REQUIRE(all);
  CHECK(all->size() == expected);
  REQUIRE(followed.size() == all->size());
  std::set<Mark> marks;
  std::map<int, Mark> last_of_writer;
  int out_of_writer_order = 0;
  for (size_t i = 0; i < followed.size(); ++i) {
    CHECK(followed[i].seq == before + static_cast<int64_t>(i) + 1);
    CHECK(followed[i].seq == all->at(i).seq);
    const Mark m = mark_of(followed[i]);
    CHECK(marks.insert(m).second);
    auto it = last_of_writer.find(std::get<0>(m));
    if (it != last_of_writer.end() && !(it->second < m)) ++out_of_writer_order;
    last_of_writer[std::get<0>(m)] = m;
  }
  CHECK(marks.size() == expected);
  CHECK(out_of_writer_order == 0);
  CHECK(*b.events().last_event_seq() == before + static_cast<int64_t>(expected));
}
