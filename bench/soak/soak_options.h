#pragma once
// kiln-soak's command line, parsed into one plain struct.
//
//   kiln-soak [--duration SECONDS] [--seed N] [--backend sqlite|postgresql]
//             [--report FILE] [--kill-every SECONDS] [--bmc-pause-every SECONDS]
//             [--warmup SECONDS] [--kilnd PATH] [--vbmc PATH] [--verbose]
//
// Both "--flag value" and "--flag=value" are accepted.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace kiln::soak {

enum class Backend { kSqlite, kPostgresql };

const char* to_string(Backend b);

struct SoakOptions {
  // How long the chaos runs; setting up before and settling after come on top.
  std::chrono::seconds duration{180};
  // Seeds every random choice the soak makes (not kilnd's timing). 0: one
  // drawn from the clock, printed so that a failing run can be repeated.
  uint64_t seed = 0;
  Backend backend = Backend::kSqlite;
  // The JSON figures of the run; none written when empty.
  std::string report_path;
  // Mean time between two kill -9 of kilnd (each gap drawn from half to one
  // and a half times this): short enough for several restarts in the 3-minute
  // CI run, long enough that each process lives past its warm-up.
  std::chrono::seconds kill_every{45};
  // Mean time between two pauses of every BMC (kiln-vbmc stopped with
  // SIGSTOP for 2 to 6 s: each BMC call in flight times out).
  std::chrono::seconds bmc_pause_every{30};
  // How long a kilnd process runs before its RSS and open descriptors are
  // held flat: caches, pools and the allocator fill up first.
  std::chrono::seconds warmup{20};
  // Other binaries than the build's own (a Release kilnd for figures):
  // passed on as KILN_KILND_BIN_OVERRIDE and KILN_VBMC_BIN_OVERRIDE.
  std::string kilnd_path;
  std::string vbmc_path;
  // Prints every action and finding as it happens.
  bool verbose = false;
  bool help = false;
};

// Errors: kInvalidArgument with a one-line message naming the flag.
Result<SoakOptions> parse_soak_args(const std::vector<std::string>& args);

const char* soak_usage();

}  // namespace kiln::soak
