#pragma once
// splitmix64 (Steele, Lea, Flood 2014): a 64-bit mixing function and the
// generator built on it. The simulated fleet's pseudo-random choices (faults,
// serial numbers, session ids) come from it: reproducible from a seed, and 8
// bytes of state per listener (a fleet has thousands).

#include <cstdint>

namespace kiln::vbmc {

// A well-mixed function of z: nearby inputs give unrelated outputs.
constexpr uint64_t splitmix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The next number of the generator whose state is `state` (advanced).
constexpr uint64_t next_random(uint64_t& state) {
  const uint64_t z = splitmix64(state);
  state += 0x9E3779B97F4A7C15ULL;
  return z;
}

}  // namespace kiln::vbmc
