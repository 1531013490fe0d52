#pragma once
// heap_in_use_bytes(): what this process's malloc has handed out and not had
// back, in bytes. Under AddressSanitizer that is its allocator's count (it
// replaces malloc; glibc's counters then read zero); otherwise glibc's
// mallinfo2. For tests that bound what a structure keeps: compare two
// readings around it, in a process with nothing else allocating meanwhile.

#include <malloc.h>

#include <cstddef>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_HEAP_IN_USE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define KILN_HEAP_IN_USE_ASAN 1
#endif

#ifdef KILN_HEAP_IN_USE_ASAN
#include <sanitizer/allocator_interface.h>
#endif

namespace kiln::testing {

inline std::size_t heap_in_use_bytes() {
#ifdef KILN_HEAP_IN_USE_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
#endif
}

}  // namespace kiln::testing
