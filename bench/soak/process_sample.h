#pragma once
// What /proc says about a process's footprint: its resident set and how many
// descriptors it has open. Linux only; blocking reads of /proc, cheap.

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace kiln::soak {

struct ProcessSample {
  int64_t rss_kib = 0;  // VmRSS of /proc/PID/status
  int fds = 0;          // entries of /proc/PID/fd
};

// nullopt when the process is gone (or a zombie: no VmRSS line then).
std::optional<ProcessSample> sample_process(pid_t pid);

}  // namespace kiln::soak
