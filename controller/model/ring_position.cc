#include "controller/model/ring_position.h"

namespace kiln {

uint64_t ring_hash(std::string_view text) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64 offset basis
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;  // FNV prime
  }
  // FNV alone leaves strings that differ in their last characters ("id#1",
  // "id#2") close together on the circle; the mixer spreads them out.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

}  // namespace kiln
