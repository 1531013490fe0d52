#pragma once
// ClusterView: what the checkers need to know about the kilnd processes
// (KilndCluster is one; the checkers' unit test has a scripted one).

#include <cstdint>
#include <string>

namespace kiln::soak {

class ClusterView {
 public:
  virtual ~ClusterView() = default;
  // Whether an instance is down or restarting now.
  virtual bool disrupted() const = 0;
  // When the cluster was last whole again after a kill (ms since the
  // epoch; 0 before any kill): see KilndCluster.
  virtual int64_t recovered_at_ms() const = 0;
  // kilnd log lines holding `needle`, for a finding's message.
  virtual std::string log_lines_with(const std::string& needle, std::size_t max_lines) const = 0;
};

}  // namespace kiln::soak
