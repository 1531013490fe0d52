#pragma once
// WaitGroup: a coroutine waits, without polling, until concurrent tasks it
// started have finished (Go's sync.WaitGroup, for Asio coroutines).
//
//   WaitGroup running;
//   for (const Job& j : jobs) {
//     co_await running.wait_below(kLimit);          // at most kLimit at once
//     asio::co_spawn(io, [&j, t = running.add()]() -> asio::awaitable<void> { co_await work(j); },
//                    asio::detached);
//   }
//   co_await running.wait();                        // every task has finished
//
// add() counts a task in and returns its Ticket; the task counts itself out
// by destroying the ticket (keep it in the task's lambda captures or
// coroutine parameters, so it goes when the task's frame does: a task
// destroyed unrun, e.g. by an io_context torn down at shutdown, counts out
// too, and the waiter is never left parked with a frame that owns it). The
// finisher that brings the count to the waiter's bound wakes it: the waiter's
// handler is posted to its own executor (never run inside the finisher's
// call), so the waiter may destroy the group as soon as it resumes.
//
// Threading: add(), the tickets and size() are safe from any thread. One
// waiter at a time (asserted): the coroutine that started the tasks. While a
// waiter is parked its executor counts outstanding work, so io_context::run()
// does not return under it. The group must outlive its tickets and its
// waiter's wait.

#include <cassert>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/parked_handler.h"

namespace kiln {

class WaitGroup {
 public:
  // One task counted in; destroying (or reset()) counts it out, once.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& o) noexcept : group_(std::exchange(o.group_, nullptr)) {}
    Ticket& operator=(Ticket&& o) noexcept {
      if (this != &o) {
        reset();
        group_ = std::exchange(o.group_, nullptr);
      }
      return *this;
    }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { reset(); }
    // Counts the task out now. Must be the task's last touch of the group.
    void reset() {
      if (WaitGroup* g = std::exchange(group_, nullptr)) g->leave();
    }

   private:
    friend class WaitGroup;
    explicit Ticket(WaitGroup* g) : group_(g) {}
    WaitGroup* group_ = nullptr;
  };

  WaitGroup() = default;
  WaitGroup(const WaitGroup&) = delete;
  WaitGroup& operator=(const WaitGroup&) = delete;
  ~WaitGroup() { assert(waiter_ == nullptr && "a WaitGroup destroyed under its waiter"); }

  // Counts one task in.
  [[nodiscard]] Ticket add() {
    std::lock_guard<std::mutex> l(mu_);
    ++count_;
    return Ticket(this);
  }

  // Tasks counted in and not yet out.
  std::size_t size() const {
    std::lock_guard<std::mutex> l(mu_);
    return count_;
  }

  // Resumes once every task has counted out (at once when none runs).
  boost::asio::awaitable<void> wait() { return wait_below(1); }

  // Resumes once fewer than `bound` tasks run (bound >= 1; at once when
  // already so). Resumes on the caller's executor.
  boost::asio::awaitable<void> wait_below(std::size_t bound) {
    assert(bound >= 1);
    {
      std::lock_guard<std::mutex> l(mu_);
      if (count_ < bound) co_return;
    }
    // The check is made again under the lock in the initiation, so a task
    // that finishes between the two is seen; the handler is parked there
    // otherwise and the last finisher posts it. A named local, not a
    // temporary in the co_await expression (docs/coroutines.md).
    auto initiation = [this, bound](auto handler) {
      std::unique_lock<std::mutex> l(mu_);
      if (count_ < bound) {
        l.unlock();
        auto ex = boost::asio::get_associated_executor(handler);
        boost::asio::post(ex, std::move(handler));
        return;
      }
      assert(waiter_ == nullptr && "one waiter at a time");
      bound_ = bound;
      waiter_ = park_handler(std::move(handler));
    };
    co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void()>(initiation,
                                                                                      boost::asio::use_awaitable);
  }

 private:
  void leave() {
    std::unique_ptr<ParkedHandler> wake;
    {
      std::lock_guard<std::mutex> l(mu_);
      assert(count_ > 0);
      --count_;
      if (waiter_ != nullptr && count_ < bound_) wake = std::move(waiter_);
    }
    // Outside the lock, and without touching `this`: the waiter may run (and
    // destroy the group) as soon as its handler is posted.
    if (wake) wake->resume();
  }

  mutable std::mutex mu_;
  std::size_t count_ = 0;
  std::size_t bound_ = 1;
  std::unique_ptr<ParkedHandler> waiter_;
};

}  // namespace kiln
