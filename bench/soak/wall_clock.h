#pragma once
// The soak compares its own clock with the times kilnd writes (event ts,
// usage rows, allocation history): both are the same machine's system clock,
// in ms since the epoch.

#include <chrono>
#include <cstdint>

namespace kiln::soak {

inline int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace kiln::soak
