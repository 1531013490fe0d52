#pragma once
// The node hold: whether an operation still holds its node.
//
// In the store, a node is held by the operation whose id is in its
// `reservation` column (conductor.h, "Locking"), and every write an operation
// makes is conditional on that: held_by() builds the condition. A write alone
// would tell an operation that lost its node (an abort, a timeout) only at
// its next write, and a wait on an agent can last many minutes. So this
// process also keeps, per node, a flag for the operation running it here:
// an abort or a timeout taken in this process lowers it at once (taken()),
// and still_held() looks at the store at most every 2 s for what this
// process did not see. Waits poll still_held(), so they end within a poll of
// losing the node instead of at its deadline.
//
// Threading: any thread. The flags are under one mutex, never held across a
// co_await; store reads run on the BlockingPool.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)

#include <boost/asio/awaitable.hpp>

#include "common/blocking_pool.h"
#include "controller/model/states.h"
#include "controller/store/node_repo.h"

namespace kiln {

// Store conditions, built outside coroutine bodies: GCC 12 rejects designated
// initialisers inside co_await arguments (docs/coroutines.md).
// Held by `op` ("" = by nobody), in `state` when given.
NodeCondition held_by(const std::string& op, std::optional<ProvisionState> state = std::nullopt);
NodeCondition in_state(ProvisionState state);

class NodeHolds {
 public:
  // One operation's hold on one node.
  struct Flag {
    std::string op_id;
    std::atomic<bool> held{true};
    std::atomic<int64_t> last_read_ms{0};  // steady clock: the last store check
  };

  // Releases its flag when the coroutine frame holding it ends, on any path.
  struct Guard {
    NodeHolds* holds;
    std::string node_id;
    std::shared_ptr<Flag> flag;
    ~Guard() { holds->release(node_id, flag); }
  };

  // `stopped` (kilnd is shutting down: nothing is held any more), `store` and
  // `db` must outlive this.
  NodeHolds(NodeRepo& store, BlockingPool& db, const std::atomic<bool>& stopped)
      : store_(store), db_(db), stopped_(stopped) {}

  // Operation `op_id` now runs node `node_id` in this process.
  std::shared_ptr<Flag> hold(const std::string& node_id, const std::string& op_id);
  // Forgets `flag` when it is still the node's (a newer hold is left alone).
  void release(const std::string& node_id, const std::shared_ptr<Flag>& flag);
  // The node was taken from whatever operation held it (abort, timeout).
  void taken(const std::string& node_id);
  // Cheap check for long waits: the flag, and the store at most every 2 s
  // (the node must still carry the flag's operation id and be in `state`).
  // A store read that fails keeps the answer the flag gives.
  asio::awaitable<bool> still_held(std::shared_ptr<Flag> flag, std::string node_id, ProvisionState state);

 private:
  NodeRepo& store_;
  BlockingPool& db_;
  const std::atomic<bool>& stopped_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Flag>> flags_;  // by node id
};

}  // namespace kiln
