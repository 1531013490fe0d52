#pragma once
// Little-endian integer fields of IPMI's wire formats (every multi-byte IPMI
// field is little-endian). The readers do no bounds checks: a caller has
// checked that [at, at + width) lies inside the buffer.

#include <cstddef>
#include <cstdint>

#include "drivers/ipmi/rmcpplus_crypto.h"  // Bytes, ByteView

namespace kiln::ipmi {

inline void put_u16le(Bytes& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
inline void put_u32le(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline uint16_t get_u16le(ByteView b, std::size_t at) { return static_cast<uint16_t>(b[at] | (b[at + 1] << 8)); }
inline uint32_t get_u32le(ByteView b, std::size_t at) {
  return static_cast<uint32_t>(b[at]) | (static_cast<uint32_t>(b[at + 1]) << 8) |
         (static_cast<uint32_t>(b[at + 2]) << 16) | (static_cast<uint32_t>(b[at + 3]) << 24);
}

}  // namespace kiln::ipmi
