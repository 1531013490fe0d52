#include "bench/soak/operation_ledger.h"

#include <set>

#include "bench/soak/api_values.h"

namespace kiln::soak {

namespace {

std::string at(const Event& e) { return " (seq " + std::to_string(e.seq) + ", node " + e.node + ")"; }

// Log lines quoted per run: reading every kilnd log is not free.
constexpr int kQuotedLogs = 3;

}  // namespace

OperationLedger::OperationLedger(Findings& findings, const ClusterView& cluster)
    : findings_(findings), cluster_(cluster) {}

void OperationLedger::broken(const std::string& message, const std::string& op) {
  std::string story = message;
  if (!op.empty() && quoted_logs_ < kQuotedLogs) {
    ++quoted_logs_;
    story += "\n  kilnd log lines naming " + op + ":\n" + cluster_.log_lines_with(op, 40);
  }
  findings_.broken(invariant::kOperationsRunOnce, story);
}

void OperationLedger::start(const Event& e, const std::string& op, std::string kind) {
  auto [it, fresh] = ops_.try_emplace(op);
  if (!fresh) {
    broken("operation " + op + " started twice: " + it->second.kind + " at seq " +
               std::to_string(it->second.started_seq) + ", " + kind + " at seq " + std::to_string(e.seq) + at(e),
           op);
    return;
  }
  it->second.node = e.node;
  it->second.kind = kind;
  it->second.started_seq = e.seq;
  ++started_by_kind_[kind];
}

void OperationLedger::end_current(const Event& e) {
  auto cur = current_.find(e.node);
  if (cur == current_.end()) return;
  auto op = ops_.find(cur->second);
  if (op != ops_.end() && op->second.ended_seq == 0) op->second.ended_seq = e.seq;
  current_.erase(cur);
}

void OperationLedger::stray(const Event& e, const std::string& op, const std::string& why) {
  auto it = ops_.find(op);
  std::string known = it == ops_.end() ? "never started"
                                       : it->second.kind + " started at seq " + std::to_string(it->second.started_seq) +
                                             (it->second.ended_seq != 0
                                                  ? ", ended at seq " + std::to_string(it->second.ended_seq)
                                                  : ", still running");
  broken(e.type + " names operation " + op + " (" + known + "), " + why + at(e), op);
}

void OperationLedger::on_event(const Event& e) {
  if (e.type == "provision.transition") on_transition(e);
  else if (e.type == "provision.resumed") on_resumed(e);
  else if (e.type == "provision.step") on_step(e);
  else if (e.type == "power.requested" || e.type == "power.transition" || e.type == "power.failed") on_power(e);
  else return;
  findings_.checked(invariant::kOperationsRunOnce);
}

void OperationLedger::on_transition(const Event& e) {
  const std::string op = e.text("op");
  const std::string verb = e.text("verb");
  auto cur = current_.find(e.node);
  if (!verb.empty()) {
    // A verb: accepted only from a stable state with no operation holding
    // the node, but abort, which ends the operation that holds it.
    if (verb != "abort" && cur != current_.end()) {
      broken("verb " + verb + " was accepted while operation " + cur->second + " held the node" + at(e), cur->second);
    }
    if (verb == "abort") endings_["abort"]++;
    if (!transient(e.to)) end_current(e);
    if (!op.empty()) {
      current_[e.node] = op;
      start(e, op, "provision:" + verb);
    }
  } else {
    // An outcome: the operation's own (naming it), or kilnd ending it for
    // a timeout, a restart or a takeover (naming none).
    const std::string outcome = e.text("outcome");
    if (!op.empty()) {
      auto it = ops_.find(op);
      if (cur == current_.end() || cur->second != op) {
        stray(e, op, "which is not the operation holding the node" +
                         (cur == current_.end() ? std::string(" (none holds it)") : " (" + cur->second + " does)"));
      } else if (it != ops_.end() && ++it->second.finished[e.from] > 1) {
        broken("operation " + op + " finished state " + e.from + " twice" + at(e), op);
      }
    }
    if (!transient(e.to)) {
      endings_[outcome.empty() ? "other" : outcome]++;
      end_current(e);
    }
  }
  if (e.to == "deploying") activations_[e.node] = 0;
  if (e.to == "active" && ++activations_[e.node] > 1)
    broken("node reached active twice in one deploy" + at(e), op);
}

void OperationLedger::on_resumed(const Event& e) {
  const std::string op = e.text("op");
  const std::string previous = e.text("previous_op");
  auto cur = current_.find(e.node);
  if (cur == current_.end() || cur->second != previous) {
    stray(e, previous, "resumed though it is not the operation holding the node");
  }
  end_current(e);
  endings_["resumed"]++;
  if (!op.empty()) {
    current_[e.node] = op;
    start(e, op, "resume:" + e.to);
  }
}

void OperationLedger::on_step(const Event& e) {
  const std::string op = e.text("op");
  if (op.empty()) return;
  auto cur = current_.find(e.node);
  if (cur == current_.end() || cur->second != op) stray(e, op, "a step of an operation that does not hold the node");
}

void OperationLedger::on_power(const Event& e) {
  const std::string op = e.text("op");
  if (e.type == "power.requested") {
    auto cur = current_power_.find(e.node);
    if (cur != current_power_.end())
      broken("a power action was accepted while power operation " + cur->second + " held the node" + at(e),
             cur->second);
    if (current_.count(e.node))
      broken("a power action was accepted while operation " + current_[e.node] + " held the node" + at(e),
             current_[e.node]);
    current_power_[e.node] = op;
    start(e, op, "power:" + e.text("action"));
    return;
  }
  if (op.empty()) return;
  auto it = ops_.find(op);
  if (it == ops_.end()) {
    stray(e, op, "a power result of an operation never requested");
    return;
  }
  if (++it->second.results > 1) {
    stray(e, op, "its result number " + std::to_string(it->second.results));
    return;
  }
  it->second.ended_seq = e.seq;
  endings_[e.type == "power.transition" ? "power_done" : "power_failed"]++;
  auto cur = current_power_.find(e.node);
  if (cur != current_power_.end() && cur->second == op) current_power_.erase(cur);
}

void OperationLedger::check_complete() {
  int64_t n = 0;
  for (const auto& [id, op] : ops_) {
    ++n;
    if (op.ended_seq != 0) continue;
    broken("operation " + id + " (" + op.kind + " on node " + op.node + ", started at seq " +
               std::to_string(op.started_seq) + ") never ended, after the soak settled",
           id);
  }
  findings_.checked(invariant::kOperationsRunOnce, n);
}

nlohmann::json OperationLedger::figures() const {
  return {{"started", started_by_kind_}, {"endings", endings_}};
}

}  // namespace kiln::soak
