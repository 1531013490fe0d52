#pragma once
// EventFeed: wakes SSE streams when the store commits new events.
//
// The store calls notify(seq) on its writing thread after each commit that
// appended events. A stream never takes events from the feed — it always reads
// them from the store by seq, so nothing is lost or reordered even if wake-ups
// are coalesced. The feed only answers "is there anything after seq N?" and
// parks a stream until there is, the keep-alive interval passes, or the feed
// is shut down.
//
// Parking: a stream registers a timer under the mutex, re-checking the latest
// seq there, so a notify() between the stream's read and its registration is
// never missed. notify() posts a cancel() to each parked timer's own executor
// (Asio timers are not thread-safe).

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

namespace kiln::api {

namespace asio = boost::asio;

class EventFeed {
 public:
  // Thread-safe; called by the store's listener.
  void notify(int64_t seq);
  // Ends every parked and future wait; returns immediately.
  void shutdown();
  bool is_shut_down() const;
  // The highest seq notified so far.
  int64_t latest() const;

  enum class Wake { kNewEvents, kTimeout, kShutdown };
  // Waits (at most `timeout`) until an event with seq > `after` was notified.
  asio::awaitable<Wake> wait_after(int64_t after, std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mu_;
  int64_t latest_ = 0;
  bool shut_down_ = false;
  std::set<std::shared_ptr<asio::steady_timer>> parked_;
};

}  // namespace kiln::api
