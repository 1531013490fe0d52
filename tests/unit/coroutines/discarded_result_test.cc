// Pattern: the result of `co_await` on an awaitable<T> with non-void T is
// discarded (`co_await power_to(run, kOff);`). GCC 12 corrupted the awaitable
// stack and later resumed an unrelated frame (docs/coroutines.md, history).

#include "tests/unit/coroutines/harness.h"

#include <catch2/catch.hpp>

#include "common/result.h"

namespace kiln::coro_test {
namespace {

enum class Power { kOff, kOn };

struct PowerRun {
  std::vector<Power> sent;
  Tracked last{long_text("none")};
};

asio::awaitable<Status> set_power(PowerRun& run, Power p) {
  co_await hop();
  run.sent.push_back(p);
  run.last = Tracked(long_text(p == Power::kOn ? "on" : "off"));
  if (run.sent.size() > 100) co_return Error(Code::kDriverError, long_text("too many"));
  co_return ok_status();
}

asio::awaitable<bool> power_to(PowerRun& run, Power p) {
  Status s = co_await set_power(run, p);
  co_return s.ok();
}

asio::awaitable<std::string> describe(PowerRun& run) {
  co_await hop();
  co_return long_text(run.last.text());
}

asio::awaitable<Tracked> tracked_copy(const PowerRun& run) {
  co_await hop();
  co_return run.last;
}

// Every non-void co_await below drops its value on the floor. (Result<T> and
// Status are [[nodiscard]]: clang reports dropping one through co_await, so
// the discarded values here are bool, std::string and Tracked.)
asio::awaitable<std::string> discards(int i) {
  PowerRun run;
  co_await power_to(run, Power::kOff);
  co_await describe(run);
  co_await power_to(run, Power::kOn);
  co_await tracked_copy(run);
  for (int k = 0; k < i % 3; ++k) co_await power_to(run, Power::kOff);
  co_await power_to(run, Power::kOn);
  std::string out = std::to_string(run.sent.size()) + ":" + run.last.text();
  co_return out;
}

TEST_CASE("a discarded co_await result leaves the frames intact", "[coroutines]") {
  REQUIRE(Tracked::live() == 0);
  std::vector<std::string> got = run_all<std::string>(64, [](int i) { return discards(i); });
  for (int i = 0; i < 64; ++i) {
    CHECK(got[i] == std::to_string(3 + i % 3) + ":" + long_text("on"));
  }
  CHECK(Tracked::live() == 0);
}

}  // namespace
}  // namespace kiln::coro_test
