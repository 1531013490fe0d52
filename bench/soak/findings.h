#pragma once
// Findings: what the invariant checkers saw, for the exit status and the
// report. A checker calls checked() each time it runs (so the report can say
// how often each invariant was held to) and broken() for each violation it
// finds, with a message that says what, where and when.
//
// The invariants, by the names the report, the log and the exit message use:
//   events-gap-free             /v1/events read by since= has every seq once, in order
//   no-transient-past-deadline  no node stays in a transient state past its timeout (plus slack)
//   operations-run-once         every operation starts once, ends once, writes nothing after
//   quota-never-exceeded        no tenant ever holds more nodes than its quota
//   usage-equals-metered-lifetime  every usage row spans its member's metered lifetime
//   tenant-isolation            a tenant's token sees and touches only its own things
//   rss-flat, fds-flat          a kilnd process's RSS and open descriptors stay flat after warm-up
//   api-no-server-errors        kilnd never answers 500 (503 while it recovers is allowed)
//   kilnd-restarts              kilnd comes back after every kill -9
//   operations-settle           once the chaos stops, every operation and allocation ends
//
// Not thread-safe: the soak's one driving thread owns it.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::soak {

namespace invariant {
inline constexpr char kEventsGapFree[] = "events-gap-free";
inline constexpr char kNoTransientPastDeadline[] = "no-transient-past-deadline";
inline constexpr char kOperationsRunOnce[] = "operations-run-once";
inline constexpr char kQuotaNeverExceeded[] = "quota-never-exceeded";
inline constexpr char kUsageEqualsMeteredLifetime[] = "usage-equals-metered-lifetime";
inline constexpr char kTenantIsolation[] = "tenant-isolation";
inline constexpr char kRssFlat[] = "rss-flat";
inline constexpr char kFdsFlat[] = "fds-flat";
inline constexpr char kApiNoServerErrors[] = "api-no-server-errors";
inline constexpr char kKilndRestarts[] = "kilnd-restarts";
inline constexpr char kOperationsSettle[] = "operations-settle";
}  // namespace invariant

class Findings {
 public:
  // `verbose`: print each violation as it is found (it is always kept).
  explicit Findings(bool verbose) : verbose_(verbose) {}

  // One more run of `name`'s check, covering `items` things (nodes, events...).
  void checked(std::string_view name, int64_t items = 1);
  // A violation of `name`. The first of the run is kept for the exit message;
  // each invariant keeps its first few messages and counts the rest.
  void broken(std::string_view name, std::string message);

  bool ok() const { return first_.empty(); }
  // "INVARIANT: message" of the first violation; "" when none.
  const std::string& first() const { return first_; }
  // {"name": {"checks", "items", "violations", "examples": [...]}} for every
  // invariant checked or broken.
  nlohmann::json to_json() const;

 private:
  struct Tally {
    int64_t checks = 0;
    int64_t items = 0;
    int64_t violations = 0;
    std::vector<std::string> examples;
  };
  bool verbose_;
  std::map<std::string, Tally, std::less<>> tallies_;
  std::string first_;
};

}  // namespace kiln::soak
