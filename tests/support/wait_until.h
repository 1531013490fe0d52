#pragma once
// wait_until: the one polling wait of the tests. Calls `pred` every `every`
// until it returns true or `limit` has passed, and returns its last answer
// (so a condition that turns true just at the deadline still counts).
// Blocking; for conditions another thread or process makes true.

#include <chrono>
#include <thread>

namespace kiln::testing {

template <typename Pred>
bool wait_until(Pred&& pred, std::chrono::milliseconds limit,
                std::chrono::milliseconds every = std::chrono::milliseconds(10)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

}  // namespace kiln::testing
