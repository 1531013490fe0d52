// Pattern: an initializer list as a coroutine argument inside a `co_await`
// expression (`co_await f(a, {obj1, obj2})`). GCC 12 rejected it ("array used
// as initializer") (docs/coroutines.md, history).
#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

namespace kiln::coro_test {
namespace {

asio::awaitable<std::string> join_all(std::string prefix, std::vector<Tracked> parts) {
  co_await hop();
  for (const Tracked& p : parts) prefix += "/" + p.text();
  co_return prefix;
}

asio::awaitable<std::string> with_initializer_list(int i) {
  Tracked a(long_text("a"));
  Tracked b(long_text(std::to_string(i)));
  std::string s = co_await join_all(long_text("p"), {a, b});
  co_return s;
}

TEST_CASE("an initializer list inside co_await compiles and is destroyed once", "[coroutines]") {
  auto got = run_all<std::string>(32, [](int i) { return with_initializer_list(i); });
  for (int i = 0; i < 32; ++i) {
    CHECK(got[i] == long_text("p") + "/" + long_text("a") + "/" + long_text(std::to_string(i)));
  }
  CHECK(Tracked::live() == 0);
}

}  // namespace
}  // namespace kiln::coro_test
