#pragma once
// OperationLedger: operations-run-once, read from the event log.
//
// Every operation kilnd runs on a node has an id (detail.op) from the event
// that starts it to the one that ends it:
//   starts  provision.transition with a verb into a transient state,
//           provision.resumed (a restart or takeover runs the node's work on
//           under a new id; previous_op names the one it ends),
//           power.requested
//   ends    a provision.transition into a stable state (done, fail, abort,
//           a timeout or a restart's fail, the last two naming no op),
//           power.transition / power.failed naming the op
// and in between it may write provision.step and provision.transition
// events naming it. The ledger holds that to these rules:
//   * an id starts once;
//   * a node runs one operation at a time (a verb is not accepted while
//     another operation holds the node);
//   * nothing names an operation after it ended, or that is not the node's
//     current one (a second runner of the same work would);
//   * an operation finishes each state once (one done/fail per state);
//   * a power operation has exactly one result (checked at the end, after
//     the soak settled: none may be missing then);
//   * a deploy reaches active at most once.
//
// Not thread-safe: the soak's driving thread.

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "bench/soak/event_feed.h"
#include "bench/soak/findings.h"
#include "bench/soak/cluster_view.h"

namespace kiln::soak {

class OperationLedger {
 public:
  // `cluster` gives the kilnd log lines a finding quotes.
  OperationLedger(Findings& findings, const ClusterView& cluster);

  void on_event(const Event& e);
  // Once everything settled: every operation ended, every power operation
  // has its one result.
  void check_complete();
  // Operations seen, by kind, and how they ended.
  nlohmann::json figures() const;

 private:
  struct Op {
    std::string node;
    std::string kind;  // "provision:<verb>", "resume:<state>", "power:<action>"
    int64_t started_seq = 0;
    int64_t ended_seq = 0;  // 0 while it runs
    int results = 0;        // power: power.transition / power.failed naming it
    std::map<std::string, int> finished;  // provision: done/fail outcomes by state
  };

  void start(const Event& e, const std::string& op, std::string kind);
  // Ends the node's current provision operation at `e` (if any).
  void end_current(const Event& e);
  // An event naming `op` while it should not: broken, with the story.
  void stray(const Event& e, const std::string& op, const std::string& why);
  void broken(const std::string& message, const std::string& op);

  void on_transition(const Event& e);
  void on_resumed(const Event& e);
  void on_step(const Event& e);
  void on_power(const Event& e);

  Findings& findings_;
  const ClusterView& cluster_;
  std::unordered_map<std::string, Op> ops_;
  std::unordered_map<std::string, std::string> current_;        // node -> provision op holding it
  std::unordered_map<std::string, std::string> current_power_;  // node -> power op holding it
  std::unordered_map<std::string, int> activations_;            // node -> active since its last deploying
  std::map<std::string, int64_t> started_by_kind_;
  std::map<std::string, int64_t> endings_;  // "done", "fail", "timeout", "restart", "abort", ...
  int quoted_logs_ = 0;
};

}  // namespace kiln::soak
