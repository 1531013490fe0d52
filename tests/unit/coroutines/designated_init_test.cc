// Pattern: a designated initializer inside a `co_await` argument list
// (`co_await f(Held{.op = op, .state = s})`). GCC 12 rejected it ("array used
// as initializer") (docs/coroutines.md, history).
#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

namespace kiln::coro_test {
namespace {

struct Held {
  std::string op;
  int state = 0;
  Tracked by{long_text("nobody")};
};

asio::awaitable<std::string> take_held(Held h) {
  co_await hop();
  co_return h.op + "@" + std::to_string(h.state) + ":" + h.by.text();
}

asio::awaitable<std::string> with_designated(int i) {
  std::string op = long_text("deploy");
  std::string s = co_await take_held(Held{.op = op, .state = i, .by = Tracked(long_text("conductor"))});
  co_return s;
}

TEST_CASE("a designated initializer inside a co_await argument list", "[coroutines]") {
  auto got = run_all<std::string>(16, [](int i) { return with_designated(i); });
  for (int i = 0; i < 16; ++i) {
    CHECK(got[i] == long_text("deploy") + "@" + std::to_string(i) + ":" + long_text("conductor"));
  }
  CHECK(Tracked::live() == 0);
}

}  // namespace
}  // namespace kiln::coro_test
