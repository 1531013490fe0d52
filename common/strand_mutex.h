#pragma once
// StrandMutex: a FIFO lock for coroutines that all run on one strand.
//
// Drivers serialise the calls to one BMC (one IPMI session, one Redfish
// session) with it: a BMC handles one exchange at a time, and a second
// caller must wait its turn without blocking a thread. Waiters are timers set
// to expire never; unlock() cancels the first one, which wakes it as the new
// owner (the lock never becomes free in between, so it stays FIFO).
//
// Not thread-safe by design: every lock() and unlock() must run on the same
// strand. lock() takes that strand (or any executor of it) by reference —
// pass the strand object itself, not a converted temporary (docs/coroutines.md).

#include <deque>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kiln {

class StrandMutex {
 public:
  StrandMutex() = default;
  StrandMutex(const StrandMutex&) = delete;
  StrandMutex& operator=(const StrandMutex&) = delete;

  // Resumes once the caller owns the lock.
  template <typename Executor>
  boost::asio::awaitable<void> lock(const Executor& strand) {
    if (!busy_) {
      busy_ = true;
      co_return;
    }
    boost::asio::steady_timer wake(strand, boost::asio::steady_timer::time_point::max());
    waiters_.push_back(&wake);
    boost::system::error_code ec;
    co_await wake.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
  }

  // Hands the lock to the first waiter, or frees it.
  void unlock() {
    if (waiters_.empty()) {
      busy_ = false;
      return;
    }
    boost::asio::steady_timer* next = waiters_.front();
    waiters_.pop_front();
    next->cancel();  // ownership passes to the waiter; busy_ stays true
  }

  // Unlocks at scope exit.
  class Guard {
   public:
    explicit Guard(StrandMutex& m) : m_(m) {}
    ~Guard() { m_.unlock(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    StrandMutex& m_;
  };

 private:
  bool busy_ = false;
  std::deque<boost::asio::steady_timer*> waiters_;
};

}  // namespace kiln
