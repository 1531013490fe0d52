#pragma once
// ParkedHandler: a suspended coroutine's completion handler, kept (type-erased)
// by whatever it waits for until that thing resumes it. The building block of
// waits without polling: an initiation passed to asio::async_initiate either
// posts its handler at once or parks it with park_handler(), and the event it
// waits for later calls resume().
//
//   auto initiation = [this](auto handler) {
//     std::lock_guard<std::mutex> l(mu_);
//     if (ready_) { asio::post(asio::get_associated_executor(handler), std::move(handler)); return; }
//     waiter_ = park_handler(std::move(handler));
//   };
//   co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(initiation, asio::use_awaitable);
//
// While parked, the handler's executor counts outstanding work, so its
// io_context::run() does not return under the waiter. resume() posts the
// handler to that executor (never runs it inside the caller), so the resumed
// coroutine may destroy whatever resumed it as soon as it runs; call it at
// most once, without holding a lock the resumed coroutine takes. Destroying an
// unresumed ParkedHandler destroys the handler (and with it the coroutine
// frame it owns) without running it.
//
// Threading: resume() may be called from any thread.

#include <memory>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

namespace kiln {

class ParkedHandler {
 public:
  virtual ~ParkedHandler() = default;
  // Posts the handler to its own executor.
  virtual void resume() = 0;
};

namespace detail {
template <typename Handler>
class ParkedHandlerOf final : public ParkedHandler {
 public:
  explicit ParkedHandlerOf(Handler&& h)
      : handler_(std::move(h)),
        work_(boost::asio::prefer(boost::asio::get_associated_executor(handler_),
                                  boost::asio::execution::outstanding_work.tracked)) {}
  void resume() override {
    auto ex = boost::asio::get_associated_executor(handler_);
    boost::asio::post(ex, std::move(handler_));
  }

 private:
  Handler handler_;
  decltype(boost::asio::prefer(std::declval<boost::asio::associated_executor_t<Handler>>(),
                               boost::asio::execution::outstanding_work.tracked)) work_;
};
}  // namespace detail

template <typename Handler>
std::unique_ptr<ParkedHandler> park_handler(Handler&& handler) {
  return std::make_unique<detail::ParkedHandlerOf<std::decay_t<Handler>>>(std::forward<Handler>(handler));
}

}  // namespace kiln
