// kiln-soak: a chaos soak of kilnd with invariants checked all along and at
// the end (bench/soak/README.md). Parses flags and runs the soak.

#include <stdlib.h>

#include <csignal>

#include <iostream>
#include <string>
#include <vector>

#include "bench/soak/soak.h"
#include "bench/soak/soak_options.h"
#include "tests/support/postgres_server.h"

namespace {

// An ASan kilnd (the build the suites use) holds up to 256 MiB of freed
// memory in quarantine to catch use-after-free, which reads as RSS growing
// for the first minute of every process and swamps a real leak. The
// children (kilnd, kiln-vbmc) get a 16 MiB quarantine unless the caller
// chose one: rss-flat then measures what kilnd keeps. ASan reads the
// variable when a process starts, so the soak's own ASan is unchanged.
void cap_children_asan_quarantine() {
  const char* set = std::getenv("ASAN_OPTIONS");
  std::string opts = set != nullptr ? set : "";
  if (opts.find("quarantine_size_mb") != std::string::npos) return;
  opts += std::string(opts.empty() ? "" : ":") + "quarantine_size_mb=16";
  ::setenv("ASAN_OPTIONS", opts.c_str(), 1);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln::soak;
  auto opts = parse_soak_args(std::vector<std::string>(argv + 1, argv + argc));
  if (!opts) {
    std::cerr << "kiln-soak: " << opts.error().message << " (see --help)\n";
    return 2;
  }
  if (opts->help) {
    std::cout << soak_usage();
    return 0;
  }
  if (opts->backend == Backend::kPostgresql) {
    if (auto missing = kiln::testing::PostgresServer::missing_binaries()) {
      std::cerr << "SKIPPED: PostgreSQL is not available (" << *missing << "); kiln-soak --backend sqlite runs without it\n";
      return 77;
    }
  }
  std::signal(SIGPIPE, SIG_IGN);  // a kilnd killed under a request
  cap_children_asan_quarantine();
  if (!opts->kilnd_path.empty()) ::setenv("KILN_KILND_BIN_OVERRIDE", opts->kilnd_path.c_str(), 1);
  if (!opts->vbmc_path.empty()) ::setenv("KILN_VBMC_BIN_OVERRIDE", opts->vbmc_path.c_str(), 1);
  try {
    return run_soak(*opts);
  } catch (const std::exception& e) {
    std::cerr << "kiln-soak: could not run: " << e.what() << std::endl;
    return 3;
  }
}
