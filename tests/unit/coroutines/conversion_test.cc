// Patterns: an implicit conversion that makes a temporary inside a `co_await`
// expression (a string literal to a std::string parameter), and an array (a
// char buffer, a string literal) passed to a std::string_view parameter. GCC
// 12 mishandled the first and rejected the second ("array used as
// initializer") (docs/coroutines.md, history).
#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <string_view>

namespace kiln::coro_test {
namespace {

asio::awaitable<std::string> take_string(std::string s) {
  co_await hop();
  co_return s;
}

asio::awaitable<std::string> take_view(std::string_view what) {
  co_await hop();
  co_return std::string(what);
}

asio::awaitable<std::string> with_conversions(int i) {
  std::string from_literal = co_await take_string("a string literal longer than the small buffer");
  char buf[40];
  std::snprintf(buf, sizeof buf, "IPMI netfn 0x%02X cmd 0x%02X", i, i + 1);
  std::string from_array = co_await take_view(buf);
  std::string from_literal_view = co_await take_view("Get Channel Authentication Capabilities");
  co_return from_literal + "|" + from_array + "|" + from_literal_view;
}

TEST_CASE("implicit conversions and array arguments inside co_await", "[coroutines]") {
  auto got = run_all<std::string>(16, [](int i) { return with_conversions(i); });
  for (int i = 0; i < 16; ++i) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "IPMI netfn 0x%02X cmd 0x%02X", i, i + 1);
    CHECK(got[i] == std::string("a string literal longer than the small buffer|") + buf +
                        "|Get Channel Authentication Capabilities");
  }
}

}  // namespace
}  // namespace kiln::coro_test
