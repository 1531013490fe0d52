// Pattern: `co_await` in the arms of `?:` and in the right operand of `&&`
// and `||`. GCC 12 freed an invalid pointer at run time with the first
// (docs/coroutines.md, history); only the chosen operand may run.

#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

namespace kiln::coro_test {
namespace {

struct Calls {
  int on = 0;
  int off = 0;
};

asio::awaitable<std::string> named(Calls& calls, bool on) {
  co_await hop();
  ++(on ? calls.on : calls.off);
  co_return long_text(on ? "on" : "off");
}

asio::awaitable<bool> truth(int& runs, bool v) {
  co_await hop();
  ++runs;
  co_return v;
}

asio::awaitable<std::string> choose(int i) {
  Calls calls;
  bool on = i % 2 == 0;
  std::string s = on ? co_await named(calls, true) : co_await named(calls, false);
  Tracked t = !on ? Tracked(co_await named(calls, true)) : Tracked(long_text("plain"));
  int runs = 0;
  bool a = false && co_await truth(runs, true);
  bool b = true || co_await truth(runs, false);
  bool c = on && co_await truth(runs, true);
  co_return s + "|" + t.text() + "|" + std::to_string(calls.on) + std::to_string(calls.off) +
      std::to_string(runs) + (a ? "a" : "") + (b ? "b" : "") + (c ? "c" : "");
}

TEST_CASE("co_await in the arms of ?: and in && / || runs only the chosen operand",
          "[coroutines]") {
  auto got = run_all<std::string>(64, [](int i) { return choose(i); });
  for (int i = 0; i < 64; ++i) {
    if (i % 2 == 0) CHECK(got[i] == long_text("on") + "|" + long_text("plain") + "|101bc");
    else CHECK(got[i] == long_text("off") + "|" + long_text("on") + "|110b");
  }
  CHECK(Tracked::live() == 0);
}

}  // namespace
}  // namespace kiln::coro_test
