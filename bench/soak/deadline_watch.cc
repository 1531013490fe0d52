#include "bench/soak/deadline_watch.h"

#include "bench/soak/api_values.h"

namespace kiln::soak {

std::chrono::seconds StateTimeouts::of(const std::string& state) const {
  auto it = by_state.find(state);
  return it == by_state.end() ? fallback : it->second;
}

std::vector<std::string> StateTimeouts::kilnd_flags() const {
  std::vector<std::string> out = {"--step-timeout", std::to_string(fallback.count())};
  for (const auto& [state, s] : by_state) out.insert(out.end(), {"--timeout", state + "=" + std::to_string(s.count())});
  return out;
}

DeadlineWatch::DeadlineWatch(Findings& findings, const ClusterView& cluster, StateTimeouts timeouts,
                             std::chrono::milliseconds slack)
    : findings_(findings), cluster_(cluster), timeouts_(std::move(timeouts)), slack_(slack) {}

void DeadlineWatch::on_event(const Event& e) {
  if (e.type != "provision.transition" || e.node.empty()) return;
  entered_[e.node] = {e.to, e.ts_ms, e.seq};
}

void DeadlineWatch::check(const nlohmann::json& nodes, int64_t sampled_ms) {
  if (cluster_.disrupted()) return;  // nobody sweeps a dead instance's nodes
  const int64_t recovered = cluster_.recovered_at_ms();
  int64_t judged = 0;
  for (const nlohmann::json& n : nodes) {
    const std::string state = str(n.value("provision_state", nlohmann::json()));
    if (!transient(state)) continue;
    const std::string id = str(n.value("id", nlohmann::json()));
    auto it = entered_.find(id);
    if (it == entered_.end() || it->second.state != state) continue;  // the log has not caught up yet
    const Entry& en = it->second;
    ++judged;
    const int64_t in_state = sampled_ms - en.ts_ms;
    if (in_state > longest_ms_) {
      longest_ms_ = in_state;
      longest_where_ = id + " in " + state;
    }
    const int64_t deadline = en.ts_ms + std::chrono::milliseconds(timeouts_.of(state)).count();
    const int64_t allowed = std::max(deadline, recovered) + slack_.count();
    if (sampled_ms <= allowed || reported_.count(en.seq)) continue;
    reported_.insert(en.seq);
    findings_.broken(invariant::kNoTransientPastDeadline,
                     "node " + id + " (" + str(n.value("name", nlohmann::json())) + ") has been " + state +
                         " for " + std::to_string(in_state / 1000) + " s (since seq " + std::to_string(en.seq) +
                         ", step " + str(n.value("provision_step", nlohmann::json())) + ", reservation " +
                         str(n.value("reservation", nlohmann::json())) + "); its timeout is " +
                         std::to_string(timeouts_.of(state).count()) + " s, the slack " +
                         std::to_string(slack_.count() / 1000) + " s, " +
                         (recovered == 0 ? std::string("no kill yet")
                                         : "the cluster last recovered " +
                                               std::to_string((sampled_ms - recovered) / 1000) + " s ago") +
                         "\n  kilnd log lines naming it:\n" +
                         cluster_.log_lines_with(id, 20));
  }
  findings_.checked(invariant::kNoTransientPastDeadline, judged);
}

nlohmann::json DeadlineWatch::figures() const {
  return {{"slack_s", static_cast<double>(slack_.count()) / 1000.0},
          {"longest_in_transient_state_s", static_cast<double>(longest_ms_) / 1000.0},
          {"longest_where", longest_where_}};
}

}  // namespace kiln::soak
