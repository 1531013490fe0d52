// Pattern: a braced class temporary passed by value to a coroutine inside a
// `co_await` expression (`co_await f(DeployRequest{x})`). GCC 12 destroyed the
// temporary twice (docs/coroutines.md, history).
#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

namespace kiln::coro_test {
namespace {

struct DeployRequest {
  Tracked image;
  int attempt = 0;
};

asio::awaitable<std::string> take_request(DeployRequest r) {
  co_await hop();
  co_return r.image.text() + "#" + std::to_string(r.attempt);
}

TEST_CASE("a braced class temporary passed by value inside co_await is destroyed once",
          "[coroutines]") {
  auto got = run_all<std::string>(32, [](int i) -> asio::awaitable<std::string> {
    return take_request(DeployRequest{Tracked(long_text("img")), i});
  });
  // The call above builds the temporary outside a coroutine; this one inside.
  auto inside = run_all<std::string>(32, [](int i) { return [](int k) -> asio::awaitable<std::string> {
    std::string s = co_await take_request(DeployRequest{Tracked(long_text("img")), k});
    co_return s;
  }(i); });
  for (int i = 0; i < 32; ++i) {
    CHECK(got[i] == long_text("img") + "#" + std::to_string(i));
    CHECK(inside[i] == got[i]);
  }
  CHECK(Tracked::live() == 0);
}

}  // namespace
}  // namespace kiln::coro_test
