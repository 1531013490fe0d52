#pragma once
// AnonymousRejectLog: one log line per interval, not per request, for
// requests refused before anyone was authenticated (no token, a bad token, a
// path that matches nothing, bytes that are not UTF-8).
//
// Anyone who can reach the port can send those as fast as the network allows;
// logging each would let them fill the disk and bury real events. The first
// refusal is logged at once; later ones within `interval` are only counted,
// and the next refusal after it logs how many there were. The exact total is
// kiln_api_rejected_anonymous_total in /metrics.
//
// Thread-safety: note() may be called from any thread.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string_view>

#include "common/log.h"

namespace kiln::api {

class AnonymousRejectLog {
 public:
  explicit AnonymousRejectLog(std::chrono::steady_clock::duration interval = std::chrono::seconds(10))
      : interval_(interval) {}

  // Records one refusal of `route` (a template or "unmatched") with `status`;
  // logs a warning through `log` when the interval has passed since the last line.
  void note(const Logger& log, std::string_view route, int status);

 private:
  const std::chrono::steady_clock::duration interval_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_line_{};
  bool logged_once_ = false;
  uint64_t since_last_line_ = 0;
};

}  // namespace kiln::api
