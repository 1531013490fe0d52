// Pattern: structured bindings in a coroutine body, used across a suspension
// (`auto& [a, b] = ...; co_await ...;`, and `for (auto& [k, v] : map)` with a
// co_await in the loop). GCC 12 mishandled them (docs/coroutines.md, history).

#include "tests/unit/coroutines/harness.h"

#include <map>
#include <utility>

#include <catch2/catch.hpp>

namespace kiln::coro_test {
namespace {

asio::awaitable<std::string> echo_back(std::string s) {
  co_await hop();
  co_return s;
}

asio::awaitable<std::string> bindings(int i) {
  std::pair<Tracked, int> entry{Tracked(long_text("node" + std::to_string(i))), i};
  auto& [node, n] = entry;
  co_await hop();
  std::string out = node.text() + "#" + std::to_string(n);
  auto [copy, m] = entry;
  co_await hop();
  out += "|" + copy.text() + "#" + std::to_string(m);
  std::map<std::string, Tracked> ports;
  ports.emplace("eth0", Tracked(long_text("aa")));
  ports.emplace("eth1", Tracked(long_text("bb")));
  for (const auto& [name, mac] : ports) {
    std::string e = co_await echo_back(mac.text());
    out += "|" + name + "=" + e;
  }
  co_return out;
}

TEST_CASE("structured bindings in a coroutine body", "[coroutines]") {
  auto got = run_all<std::string>(64, [](int i) { return bindings(i); });
  for (int i = 0; i < 64; ++i) {
    std::string node = long_text("node" + std::to_string(i)) + "#" + std::to_string(i);
    CHECK(got[i] == node + "|" + node + "|eth0=" + long_text("aa") + "|eth1=" + long_text("bb"));
  }
  CHECK(Tracked::live() == 0);
}

}  // namespace
}  // namespace kiln::coro_test
