#include "controller/api/event_feed.h"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kiln::api {

void EventFeed::notify(int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  if (seq > latest_) latest_ = seq;
  for (const auto& timer : parked_)
    asio::post(timer->get_executor(), [timer] { timer->cancel(); });
}

void EventFeed::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_down_ = true;
  for (const auto& timer : parked_)
    asio::post(timer->get_executor(), [timer] { timer->cancel(); });
}

bool EventFeed::is_shut_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shut_down_;
}

int64_t EventFeed::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

asio::awaitable<EventFeed::Wake> EventFeed::wait_after(int64_t after,
                                                       std::chrono::milliseconds timeout) {
  auto timer = std::make_shared<asio::steady_timer>(co_await asio::this_coro::executor);
  timer->expires_after(timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) co_return Wake::kShutdown;
    if (latest_ > after) co_return Wake::kNewEvents;
    parked_.insert(timer);
  }
  boost::system::error_code ec;
  co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
  std::lock_guard<std::mutex> lock(mu_);
  parked_.erase(timer);
  if (shut_down_) co_return Wake::kShutdown;
  if (latest_ > after) co_return Wake::kNewEvents;
  co_return Wake::kTimeout;
}

}  // namespace kiln::api
