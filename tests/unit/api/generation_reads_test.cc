// GenerationReads (controller/api/generation_reads.h): callers that ask while
// a read runs share the next read, and no caller is ever answered by a read
// that started before it asked (it would miss commits it must see).
#include <catch2/catch.hpp>

#include <utility>  // before Asio (docs/coroutines.md)

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "common/blocking_pool.h"
#include "controller/api/generation_reads.h"

namespace asio = boost::asio;
using kiln::BlockingPool;
using kiln::Result;
using kiln::WriteGeneration;
using kiln::api::GenerationReads;

namespace {

// A database whose reads the test holds until it lets them finish; each
// read's value is its own number (1, 2, ...), taken when it starts.
struct HeldDatabase {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  int allowed = 0;  // reads allowed to finish
  bool fail_next = false;

  Result<WriteGeneration> read() {
    std::unique_lock<std::mutex> l(mu);
    const int n = ++started;
    cv.notify_all();
    cv.wait(l, [&] { return allowed >= n; });
    if (fail_next) {
      fail_next = false;
      return kiln::Error(kiln::Code::kUnavailable, "database gone");
    }
    return WriteGeneration{static_cast<uint64_t>(n), "snapshot " + std::to_string(n)};
  }
  void allow(int n) {
    std::lock_guard<std::mutex> l(mu);
    allowed = n;
    cv.notify_all();
  }
  int started_now() {
    std::lock_guard<std::mutex> l(mu);
    return started;
  }
};

struct Answer {
  int asked_after = -1;   // reads started when the caller asked
  uint64_t order = 0;     // 0: not answered yet
  bool failed = false;
};

void ask(asio::io_context& io, GenerationReads& reads, HeldDatabase& db, Answer& a, std::atomic<int>& answered) {
  a.asked_after = db.started_now();
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    Result<WriteGeneration> g = co_await reads.read();
    if (g) a.order = g->order;
    else a.failed = true;
    answered.fetch_add(1);
  }, asio::detached);
}

// Runs `io` until `cond` holds (the pool's threads finish reads meanwhile).
template <typename Cond>
void run_until(asio::io_context& io, Cond cond) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    REQUIRE(std::chrono::steady_clock::now() < end);
    io.run_for(std::chrono::milliseconds(5));
    io.restart();
  }
}

// A GenerationReads on a HeldDatabase, run by the test's own io_context.
struct Rig {
  HeldDatabase db;
  BlockingPool pool{2};
  asio::io_context io;
  GenerationReads reads{pool, [this] { return db.read(); }};
  std::atomic<int> answered{0};

  void ask(Answer& a) { ::ask(io, reads, db, a, answered); }
  // `first` asks and its read starts (held); then each of `during` asks.
  void ask_during_a_held_read(Answer& first, std::vector<Answer>& during) {
    ask(first);
    // Driven until its read is on the pool: the coroutine's start may take
    // more than one round of ready handlers.
    run_until(io, [&] { return db.started_now() >= 1; });
    for (Answer& a : during) ask(a);
    io.poll();
  }
  // Drives `io` until the n-th read has started: the caller woken to lead a
  // read is resumed on `io`, and only then hands the read to the pool.
  void wait_read_started(int n) {
    run_until(io, [&] { return db.started_now() >= n; });
  }
};

}  // namespace

TEST_CASE("generation reads: callers asking during a read share the next one, never the running one",
          "[generation_reads]") {
  Rig r;
  Answer first;
  std::vector<Answer> during(10);
  r.ask_during_a_held_read(first, during);
  // They wait: none may take read 1, and read 2 waits for read 1 to end.
  CHECK(r.answered.load() == 0);
  CHECK(r.db.started_now() == 1);

  r.db.allow(1);
  run_until(r.io, [&] { return r.answered.load() == 1; });
  CHECK(first.order == 1);
  r.wait_read_started(2);  // one read for all ten, started after read 1 ended
  CHECK(r.answered.load() == 1);

  r.db.allow(2);
  run_until(r.io, [&] { return r.answered.load() == 11; });
  for (const Answer& a : during) {
    CHECK(a.order == 2);
    CHECK(a.order > static_cast<uint64_t>(a.asked_after));
  }
  CHECK(r.reads.statements() == 2);
  CHECK(r.reads.callers() == 11);

  // Nothing is left running: the next caller leads a read of its own at once.
  Answer later;
  r.ask(later);
  r.io.poll();
  r.wait_read_started(3);
  r.db.allow(3);
  run_until(r.io, [&] { return r.answered.load() == 12; });
  CHECK(later.order == 3);
  CHECK(r.reads.statements() == 3);
}

TEST_CASE("generation reads: a failed read answers its whole batch with the error, and the next read runs",
          "[generation_reads]") {
  Rig r;
  Answer first;
  std::vector<Answer> batch(3);
  r.ask_during_a_held_read(first, batch);
  r.db.allow(1);
  run_until(r.io, [&] { return r.answered.load() == 1; });
  r.wait_read_started(2);
  {
    std::lock_guard<std::mutex> l(r.db.mu);
    r.db.fail_next = true;
  }
  r.db.allow(2);
  run_until(r.io, [&] { return r.answered.load() == 4; });
  for (const Answer& a : batch) CHECK(a.failed);

  Answer after;
  r.ask(after);
  r.db.allow(3);
  run_until(r.io, [&] { return r.answered.load() == 5; });
  CHECK_FALSE(after.failed);
  CHECK(after.order == 3);
}

TEST_CASE("generation reads: under concurrent callers on four threads every answer is at least as new as "
          "the commits before its call",
          "[generation_reads]") {
  // A writer commits all the time; a read's value is the commits finished
  // when its statement started, as pg_current_snapshot() is.
  std::atomic<uint64_t> commits{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop.load()) {
      commits.fetch_add(1);
      std::this_thread::yield();
    }
  });
  BlockingPool pool(2);
  asio::io_context io;
  GenerationReads reads(pool, [&]() -> Result<WriteGeneration> {
    uint64_t seen = commits.load();
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // the round trip
    return WriteGeneration{seen, std::to_string(seen)};
  });
  constexpr int kCallers = 2000;
  std::vector<uint64_t> before(kCallers), got(kCallers);
  std::atomic<int> answered{0};
  auto guard = asio::make_work_guard(io);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&] { io.run(); });
  for (int i = 0; i < kCallers; ++i) {
    asio::post(io, [&, i] {
      before[i] = commits.load();
      asio::co_spawn(io, [&, i]() -> asio::awaitable<void> {
        Result<WriteGeneration> g = co_await reads.read();
        got[i] = g ? g->order : 0;
        answered.fetch_add(1);
      }, asio::detached);
    });
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (answered.load() < kCallers && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  guard.reset();
  io.stop();
  for (std::thread& t : threads) t.join();
  stop = true;
  writer.join();
  REQUIRE(answered.load() == kCallers);
  int stale = 0;
  for (int i = 0; i < kCallers; ++i)
    if (got[i] < before[i]) ++stale;
  CHECK(stale == 0);
  CHECK(reads.callers() == kCallers);
  // Shared: far fewer statements than callers (each waits at most for one
  // read in flight, so the rest pile up behind it).
  CHECK(reads.statements() < kCallers / 4);
}
