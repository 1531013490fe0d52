#include "controller/conductor/node_hold.h"

#include <chrono>

namespace kiln {

NodeCondition held_by(const std::string& op, std::optional<ProvisionState> state) {
  NodeCondition c;
  c.reservation = op;
  c.provision_state = state;
  return c;
}

NodeCondition in_state(ProvisionState state) {
  NodeCondition c;
  c.provision_state = state;
  return c;
}

std::shared_ptr<NodeHolds::Flag> NodeHolds::hold(const std::string& node_id, const std::string& op_id) {
  auto f = std::make_shared<Flag>();
  f->op_id = op_id;
  std::lock_guard<std::mutex> l(mu_);
  flags_[node_id] = f;
  return f;
}

void NodeHolds::release(const std::string& node_id, const std::shared_ptr<Flag>& flag) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = flags_.find(node_id);
  if (it != flags_.end() && it->second == flag) flags_.erase(it);
}

void NodeHolds::taken(const std::string& node_id) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = flags_.find(node_id);
  if (it != flags_.end()) it->second->held = false;
}

asio::awaitable<bool> NodeHolds::still_held(std::shared_ptr<Flag> flag, std::string node_id, ProvisionState state) {
  if (stopped_ || !flag->held) co_return false;
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - flag->last_read_ms.load() < 2000) co_return true;
  flag->last_read_ms = now;
  auto n = co_await db_.run([&] { return store_.get_node(node_id); });
  if (n && (n->reservation != flag->op_id || n->provision_state != state)) flag->held = false;
  co_return flag->held.load();
}

}  // namespace kiln
