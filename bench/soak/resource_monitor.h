#pragma once
// ResourceMonitor: rss-flat and fds-flat, per kilnd process.
//
// Every kilnd process (each start after a kill -9 is a new one) is sampled
// (VmRSS and open descriptors, /proc) while it runs. Once it has lived past
// its warm-up (caches, the database's pages, the allocator and the
// connection pools fill up first) it must stay flat: over the samples after
// the warm-up, the lowest of the last five may be at most `rss_bound` (RSS)
// or `fd_bound` (descriptors) above the highest of the first five. Lowest
// against highest, so that a burst (a page of events, a batch of BMC
// connections) is not growth; only a level that stays up is. A process is
// judged when it ends (killed, or the run ends) and only when at least
// `min_window` of samples followed its warm-up.
//
// kiln-vbmc, which lives through the whole run, is sampled for the report
// only: its held requests to "dead" BMCs are the fault, not a leak.
//
// Not thread-safe: the soak's driving thread.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/soak/findings.h"
#include "bench/soak/kilnd_cluster.h"

namespace kiln::soak {

struct FlatnessBounds {
  std::chrono::seconds warmup{20};
  std::chrono::seconds min_window{20};
  int64_t rss_bound_kib = 16 * 1024;
  int fd_bound = 8;
};

class ResourceMonitor {
 public:
  ResourceMonitor(Findings& findings, FlatnessBounds bounds);

  // Samples the processes running now (and `vbmc`, -1 for none), and judges
  // the ones that are no longer among them.
  void sample(const std::vector<KilndCluster::Process>& running, pid_t vbmc, int64_t now_ms);
  // Judges every process still followed (the end of the run).
  void finish();
  nlohmann::json figures() const;

 private:
  struct Point {
    int64_t t_ms = 0;  // since the process became ready
    int64_t rss_kib = 0;
    int fds = 0;
  };
  struct Followed {
    KilndCluster::Process process;
    std::vector<Point> points;
    bool judged = false;
    nlohmann::json verdict;
  };
  void judge(Followed& f);

  Findings& findings_;
  FlatnessBounds bounds_;
  std::map<std::pair<std::size_t, int>, Followed> followed_;  // (instance, incarnation)
  std::vector<Point> vbmc_;
  int64_t vbmc_start_ms_ = 0;
};

}  // namespace kiln::soak
