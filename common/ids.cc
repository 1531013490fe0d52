#include "common/ids.h"

#include <openssl/rand.h>

#include <cctype>
#include <stdexcept>
#include <vector>

namespace kiln {
namespace {
void fill_random(unsigned char* p, size_t n) {
  if (RAND_bytes(p, static_cast<int>(n)) != 1) throw std::runtime_error("RAND_bytes failed");
}
const char kHex[] = "0123456789abcdef";
}  // namespace

std::string new_uuid() {
  unsigned char b[16];
  fill_random(b, sizeof b);
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  std::string s;
  s.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s.push_back('-');
    s.push_back(kHex[b[i] >> 4]);
    s.push_back(kHex[b[i] & 0xf]);
  }
  return s;
}

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (s[i] != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
  }
  return true;
}

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> b(bytes);
  fill_random(b.data(), b.size());
  std::string s;
  s.reserve(bytes * 2);
  for (unsigned char c : b) {
    s.push_back(kHex[c >> 4]);
    s.push_back(kHex[c & 0xf]);
  }
  return s;
}

}  // namespace kiln
