#include "controller/api/anonymous_log.h"

#include <string>

namespace kiln::api {

void AnonymousRejectLog::note(const Logger& log, std::string_view route, int status) {
  uint64_t count = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++since_last_line_;
    auto now = std::chrono::steady_clock::now();
    if (logged_once_ && now - last_line_ < interval_) return;
    logged_once_ = true;
    last_line_ = now;
    count = since_last_line_;
    since_last_line_ = 0;
  }
  log.warn("unauthenticated requests refused",
           {{"count", std::to_string(count)}, {"last_route", std::string(route)}, {"last_status", std::to_string(status)}});
}

}  // namespace kiln::api
