#pragma once
// BlockingPool: runs blocking calls (SQLite writes, libvirt, disk I/O) on a
// small fixed set of threads so they never stall the I/O threads.
//
//   Result<Node> n = co_await pool.run([&] { return store.get_node(id); });
//
// The coroutine is suspended while the call runs on a pool thread and resumes
// on its own executor afterwards. Exceptions thrown by the call are rethrown in
// the coroutine. Capturing by reference is safe: the coroutine frame outlives
// the call because it is suspended until the call returns.

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kiln {

namespace asio = boost::asio;

class BlockingPool {
 public:
  explicit BlockingPool(std::size_t threads) : pool_(threads) {}
  ~BlockingPool() { stop(); }
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  // Runs f() on a pool thread; returns its result on the caller's executor.
  template <typename F>
  asio::awaitable<std::invoke_result_t<F&>> run(F f) {
    using R = std::invoke_result_t<F&>;
    auto caller = co_await asio::this_coro::executor;
    // The initiation is a named local, not a temporary inside the co_await
    // expression: GCC 12 destroyed such a temporary (and the executor it
    // captured) while the call was still running (docs/coroutines.md).
    if constexpr (std::is_void_v<R>) {
      auto initiation = [this, &f, caller](auto handler) mutable {
        asio::post(pool_, [&f, caller, handler = std::move(handler)]() mutable {
          std::exception_ptr ep;
          try { f(); } catch (...) { ep = std::current_exception(); }
          asio::post(caller, [ep, handler = std::move(handler)]() mutable { handler(ep); });
        });
      };
      co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr)>(
          initiation, asio::use_awaitable);
    } else {
      std::optional<R> out;
      auto initiation = [this, &f, &out, caller](auto handler) mutable {
        asio::post(pool_, [&f, &out, caller, handler = std::move(handler)]() mutable {
          std::exception_ptr ep;
          try { out.emplace(f()); } catch (...) { ep = std::current_exception(); }
          asio::post(caller, [ep, handler = std::move(handler)]() mutable { handler(ep); });
        });
      };
      co_await asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr)>(
          initiation, asio::use_awaitable);
      co_return std::move(*out);
    }
  }

  // Waits for queued calls to finish and joins the threads. Idempotent.
  void stop() {
    if (!stopped_) {
      stopped_ = true;
      pool_.join();
    }
  }

 private:
  asio::thread_pool pool_;
  bool stopped_ = false;
};

}  // namespace kiln
