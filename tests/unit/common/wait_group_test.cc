// WaitGroup (common/wait_group.h): the waiter resumes exactly when the last
// task counts out, never before, without a timer; from tasks finishing on
// other threads too (no lost wake-up); and a task destroyed unrun counts out.
#include <catch2/catch.hpp>

#include <utility>  // before Asio (docs/coroutines.md)

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/wait_group.h"

namespace asio = boost::asio;
using kiln::WaitGroup;

namespace {

// A task that waits until the test opens its gate (a timer that never
// expires by itself, cancelled by the test).
struct Gate {
  explicit Gate(asio::io_context& io) : timer(io, asio::steady_timer::time_point::max()) {}
  asio::steady_timer timer;
};

asio::awaitable<void> gated(Gate& g, WaitGroup::Ticket ticket) {
  boost::system::error_code ec;
  co_await g.timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  (void)ticket;  // counted out when this frame goes
}

}  // namespace

TEST_CASE("wait group: the waiter resumes when the last task finishes and not before", "[wait_group]") {
  WaitGroup group;  // outlives the io_context and the tasks it holds
  asio::io_context io;
  std::vector<std::unique_ptr<Gate>> gates;
  for (int i = 0; i < 3; ++i) {
    gates.push_back(std::make_unique<Gate>(io));
    asio::co_spawn(io, gated(*gates.back(), group.add()), asio::detached);
  }
  bool resumed = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    co_await group.wait();
    resumed = true;
  }, asio::detached);
  io.poll();
  CHECK(group.size() == 3);
  CHECK_FALSE(resumed);
  // Nothing runs while every task is parked: no timer, no poll.
  CHECK(io.poll() == 0);
  for (int i = 0; i < 3; ++i) {
    CHECK_FALSE(resumed);
    gates[i]->timer.cancel();
    io.poll();
    CHECK(group.size() == static_cast<std::size_t>(2 - i));
  }
  CHECK(resumed);
}

TEST_CASE("wait group: wait with no task resumes at once, wait_below bounds the tasks in flight", "[wait_group]") {
  WaitGroup group;  // outlives the io_context and the tasks it holds
  asio::io_context io;
  bool empty_done = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    co_await group.wait();
    empty_done = true;
  }, asio::detached);
  io.poll();
  CHECK(empty_done);
  io.restart();  // it ran out of work

  Gate a(io), b(io);
  asio::co_spawn(io, gated(a, group.add()), asio::detached);
  asio::co_spawn(io, gated(b, group.add()), asio::detached);
  bool room = false;
  asio::co_spawn(io, [&]() -> asio::awaitable<void> {
    co_await group.wait_below(2);  // a third may start once one of two has finished
    room = true;
  }, asio::detached);
  io.poll();
  CHECK_FALSE(room);
  b.timer.cancel();
  io.poll();
  CHECK(room);
  CHECK(group.size() == 1);
  a.timer.cancel();
  io.poll();
  CHECK(group.size() == 0);
}

TEST_CASE("wait group: tasks finishing on other threads wake the waiter every time", "[wait_group]") {
  // Each round: four threads count out at once while the waiter parks; a
  // lost wake-up would leave io.run() blocked (the parked waiter holds the
  // io_context's work) and the test would hang rather than pass.
  for (int round = 0; round < 300; ++round) {
    asio::io_context io;
    WaitGroup group;
    std::vector<WaitGroup::Ticket> tickets;
    for (int i = 0; i < 4; ++i) tickets.push_back(group.add());
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (auto& t : tickets)
      threads.emplace_back([&go, ticket = std::move(t)]() mutable {
        while (!go.load()) std::this_thread::yield();
        ticket.reset();
      });
    bool resumed = false;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> {
      go = true;
      co_await group.wait();
      resumed = true;
    }, asio::detached);
    io.run();
    for (auto& t : threads) t.join();
    REQUIRE(resumed);
    REQUIRE(group.size() == 0);
  }
}

TEST_CASE("wait group: a task destroyed before it ran counts out", "[wait_group]") {
  WaitGroup group;
  {
    asio::io_context never_run;
    Gate g(never_run);
    asio::co_spawn(never_run, gated(g, group.add()), asio::detached);
    CHECK(group.size() == 1);
  }  // the io_context destroys the task's frame, and its ticket with it
  CHECK(group.size() == 0);
}
