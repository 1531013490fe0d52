// Pattern: non-trivial locals declared in the case blocks of a `switch` in a
// coroutine, alive across a suspension. GCC 12 mishandled them
// (docs/coroutines.md, history).

#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

namespace kiln::coro_test {
namespace {

enum class Verb { kDeploy, kClean, kInspect, kRescue };

asio::awaitable<std::string> echo(std::string s) {
  co_await hop();
  co_return s;
}

asio::awaitable<std::string> by_verb(Verb v, int i) {
  std::string out;
  switch (v) {
    case Verb::kDeploy: {
      Tracked image(long_text("image" + std::to_string(i)));
      std::string name = long_text("deploy");
      co_await hop();
      std::string echoed = co_await echo(name);
      out = echoed + "/" + image.text();
      break;
    }
    case Verb::kClean: {
      std::vector<Tracked> disks{Tracked(long_text("sda")), Tracked(long_text("sdb"))};
      for (const Tracked& d : disks) {
        std::string e = co_await echo(d.text());
        out += e + ";";
      }
      break;
    }
    case Verb::kInspect: {
      Tracked report(long_text("inventory"));
      co_await hop();
      out = report.text();
      co_return out + "!";
    }
    default:
      out = long_text("rescue");
      co_await hop();
      break;
  }
  co_return out;
}

TEST_CASE("non-trivial locals in switch cases of a coroutine", "[coroutines]") {
  auto got = run_all<std::string>(64, [](int i) { return by_verb(static_cast<Verb>(i % 4), i); });
  for (int i = 0; i < 64; ++i) {
    switch (i % 4) {
      case 0: CHECK(got[i] == long_text("deploy") + "/" + long_text("image" + std::to_string(i))); break;
      case 1: CHECK(got[i] == long_text("sda") + ";" + long_text("sdb") + ";"); break;
      case 2: CHECK(got[i] == long_text("inventory") + "!"); break;
      default: CHECK(got[i] == long_text("rescue")); break;
    }
  }
  CHECK(Tracked::live() == 0);
}

}  // namespace
}  // namespace kiln::coro_test
