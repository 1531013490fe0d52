#pragma once
// DeadlineWatch: no-transient-past-deadline.
//
// A node that enters a transient state (verifying, inspecting, cleaning,
// burning_in, deploying, validating) must leave it within that state's
// timeout: kilnd's timeout sweep fails it otherwise. The watch learns from
// the event log when each node entered its state (the provision.transition
// into it; a resumed operation keeps the deadline) and holds each sample of
// the nodes to
//
//   now <= max(entered + timeout, cluster recovered) + slack
//
// where "cluster recovered" is when the last kill -9 stopped mattering (the
// restarted kilnd ready; on PostgreSQL also the kill plus the conductor
// timeout, after which the survivors sweep the killed one's nodes): a node
// whose deadline passed while no kilnd could sweep it is allowed the slack
// from then. While an instance is down nothing is judged. The slack covers
// the sweep's period and a loaded machine; it is stated in the report.
//
// The sample is read before the events are polled, so the entry time the
// watch knows for a node's state is never older than the one the sample
// reflects (a node that left and re-entered a state meanwhile is judged by
// its newer entry).
//
// Not thread-safe: the soak's driving thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/soak/event_feed.h"
#include "bench/soak/findings.h"
#include "bench/soak/cluster_view.h"

namespace kiln::soak {

// The timeouts the soak gives kilnd (--step-timeout and --timeout
// STATE=SECONDS), so that the watch judges by the same numbers.
struct StateTimeouts {
  std::chrono::seconds fallback{20};
  std::map<std::string, std::chrono::seconds> by_state;

  std::chrono::seconds of(const std::string& state) const;
  std::vector<std::string> kilnd_flags() const;
};

class DeadlineWatch {
 public:
  DeadlineWatch(Findings& findings, const ClusterView& cluster, StateTimeouts timeouts,
                std::chrono::milliseconds slack);

  void on_event(const Event& e);
  // `nodes`: GET /v1/nodes' nodes as staff see them, read at `sampled_ms`
  // (before the events were polled).
  void check(const nlohmann::json& nodes, int64_t sampled_ms);

  std::chrono::milliseconds slack() const { return slack_; }
  // The longest a node was seen in one transient state, and where.
  nlohmann::json figures() const;

 private:
  struct Entry {
    std::string state;
    int64_t ts_ms = 0;
    int64_t seq = 0;
  };
  Findings& findings_;
  const ClusterView& cluster_;
  StateTimeouts timeouts_;
  std::chrono::milliseconds slack_;
  std::unordered_map<std::string, Entry> entered_;
  std::set<int64_t> reported_;  // entries already found overdue (by seq)
  int64_t longest_ms_ = 0;
  std::string longest_where_;
};

}  // namespace kiln::soak
