// Pattern: a sequence of `if (todo(...)) { if (!co_await step()) co_return
// false; }` blocks pulled into an awaitable<bool> helper. Under GCC 12 such a
// helper in workflow.cc died with SIGILL on its first call
// (docs/coroutines.md, history).

#include "tests/unit/coroutines/harness.h"

#include <set>

#include <catch2/catch.hpp>

#include "common/result.h"

namespace kiln::coro_test {
namespace {

struct Run {
  std::set<std::string> todo;
  std::string fail_at;
  std::vector<std::string> done;
};

bool todo(const Run& run, const std::string& step) { return run.todo.count(step) > 0; }

asio::awaitable<Status> driver_call(Run& run, std::string step) {
  co_await hop();
  if (step == run.fail_at) co_return Error(Code::kDriverError, long_text(step));
  co_return ok_status();
}

asio::awaitable<bool> run_step(Run& run, const std::string& step) {
  Status s = co_await driver_call(run, step);
  if (!s) co_return false;
  run.done.push_back(step);
  co_return true;
}

asio::awaitable<bool> boot_steps(Run& run) {
  const std::string pxe = "set_boot_pxe";
  const std::string power = "power_on";
  const std::string wait = "wait_for_agent";
  if (todo(run, pxe)) {
    if (!co_await run_step(run, pxe)) co_return false;
  }
  if (todo(run, power)) {
    if (!co_await run_step(run, power)) co_return false;
  }
  if (todo(run, wait)) {
    if (!co_await run_step(run, wait)) co_return false;
  }
  co_return true;
}

asio::awaitable<std::string> flow(int i) {
  Run run;
  run.todo = {"set_boot_pxe", "power_on", "wait_for_agent"};
  if (i % 4 == 1) run.todo.erase("power_on");
  if (i % 4 == 2) run.fail_at = "power_on";
  bool ok = co_await boot_steps(run);
  std::string out = ok ? "ok" : "failed";
  for (const std::string& s : run.done) out += " " + s;
  co_return out;
}

TEST_CASE("step sequences in an awaitable<bool> helper", "[coroutines]") {
  auto got = run_all<std::string>(64, [](int i) { return flow(i); });
  for (int i = 0; i < 64; ++i) {
    if (i % 4 == 1) CHECK(got[i] == "ok set_boot_pxe wait_for_agent");
    else if (i % 4 == 2) CHECK(got[i] == "failed set_boot_pxe");
    else CHECK(got[i] == "ok set_boot_pxe power_on wait_for_agent");
  }
}

}  // namespace
}  // namespace kiln::coro_test
