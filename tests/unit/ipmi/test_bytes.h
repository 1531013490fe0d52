#pragma once
// Hex helpers shared by the IPMI unit tests.

#include <string>
#include <string_view>

#include "drivers/ipmi/rmcpplus_crypto.h"

namespace kiln::ipmi::test {

inline Bytes hex(std::string_view s) {
  Bytes out;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  int hi = -1;
  for (char c : s) {
    const int v = nib(c);
    if (v < 0) continue;  // spaces and separators
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi * 16 + v));
      hi = -1;
    }
  }
  return out;
}

inline std::string to_hex(ByteView b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s.push_back(d[x >> 4]);
    s.push_back(d[x & 15]);
  }
  return s;
}

template <size_t N>
std::array<uint8_t, N> arr(std::string_view s) {
  Bytes b = hex(s);
  std::array<uint8_t, N> a{};
  for (size_t i = 0; i < N && i < b.size(); ++i) a[i] = b[i];
  return a;
}

}  // namespace kiln::ipmi::test
