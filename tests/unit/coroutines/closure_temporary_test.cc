// Pattern: lambda temporaries inside a `co_await` expression: the initiation
// passed to asio::async_initiate (as common/blocking_pool.h's run() would
// write it) and a lambda converted to a std::function parameter. GCC 12
// destroyed such closures, and the executor they captured, while the call was
// still running (docs/coroutines.md, history).
#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

#include <memory>

#include <boost/asio/async_result.hpp>
#include <boost/asio/thread_pool.hpp>

namespace kiln::coro_test {
namespace {

asio::awaitable<std::string> offload(asio::thread_pool& pool, std::function<std::string()> f) {
  co_await hop();
  std::string out;
  // The initiation is a lambda temporary inside the co_await expression.
  auto caller = co_await asio::this_coro::executor;
  co_await asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
      [&pool, &f, &out, caller](auto handler) {
        asio::post(pool, [&f, &out, caller, handler = std::move(handler)]() mutable {
          out = f();
          asio::post(caller, std::move(handler));
        });
      },
      asio::use_awaitable);
  co_return out;
}

asio::awaitable<std::string> with_closures(asio::thread_pool& pool, int i) {
  auto owner = std::make_shared<Tracked>(long_text(std::to_string(i)));
  // A lambda temporary converted to the std::function parameter inside co_await.
  std::string s = co_await offload(pool, [owner] { return owner->text(); });
  co_return s + ":" + std::to_string(owner.use_count());
}

TEST_CASE("lambda temporaries inside co_await live until the call ends", "[coroutines]") {
  asio::thread_pool pool(2);
  auto got = run_all<std::string>(64, [&pool](int i) { return with_closures(pool, i); });
  pool.join();
  for (int i = 0; i < 64; ++i) CHECK(got[i] == long_text(std::to_string(i)) + ":1");
  CHECK(Tracked::live() == 0);
}

}  // namespace
}  // namespace kiln::coro_test
