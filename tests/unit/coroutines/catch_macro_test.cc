// Pattern: `co_await` inside a Catch2 assertion (`REQUIRE(co_await x)`). The
// macro's expansion names the expression again in a branch that never runs;
// GCC 12 ran the co_await there too (docs/coroutines.md, history).

#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

namespace kiln::coro_test {
namespace {

asio::awaitable<int> next(int& counter) {
  co_await hop();
  co_return ++counter;
}

asio::awaitable<int> assert_inside(int) {
  int counter = 0;
  REQUIRE(co_await next(counter) == 1);
  CHECK(co_await next(counter) == 2);
  REQUIRE_FALSE(co_await next(counter) == 0);
  co_return counter;
}

TEST_CASE("co_await inside a Catch2 assertion runs once", "[coroutines]") {
  auto got = run_all<int>(8, [](int i) { return assert_inside(i); });
  for (int c : got) CHECK(c == 3);
}

}  // namespace
}  // namespace kiln::coro_test
