#include "common/fd_limit.h"

#include <sys/resource.h>

#include <atomic>
#include <limits>

namespace kiln {

namespace {

// The soft limit raise_fd_limit() replaced; RLIM_INFINITY while it has not.
std::atomic<rlim_t> original_soft{RLIM_INFINITY};

std::size_t as_size(rlim_t v) {
  if (v == RLIM_INFINITY || v > std::numeric_limits<std::size_t>::max()) {
    return std::numeric_limits<std::size_t>::max();
  }
  return static_cast<std::size_t>(v);
}

}  // namespace

std::size_t raise_fd_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  if (r.rlim_cur < r.rlim_max) {
    const rlim_t before = r.rlim_cur;
    r.rlim_cur = r.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) return as_size(before);
    rlim_t unset = RLIM_INFINITY;
    original_soft.compare_exchange_strong(unset, before);
  }
  return as_size(r.rlim_cur);
}

std::size_t fd_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  return as_size(r.rlim_cur);
}

void restore_fd_limit_in_child() {
  const rlim_t soft = original_soft.load();
  if (soft == RLIM_INFINITY) return;
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  r.rlim_cur = soft;
  (void)::setrlimit(RLIMIT_NOFILE, &r);
}

}  // namespace kiln
