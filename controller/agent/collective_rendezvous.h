#pragma once
// CollectiveRendezvous: kilnd as the rendezvous of the nccl_multinode check
// (issue 6; the agent side is docs/agent-protocol.md, "Multi-node
// collective"). No MPI, no SSH: every message goes through the agents'
// ordinary command channel (AgentBroker::run_command).
//
// Who takes part. The nodes deployed with one allocation id (the deploy
// verb's `allocation`) that are in deploying or validating. Each of them,
// once its own quick plan passed, calls run_check() from its validating
// workflow and waits there until every other such node has joined too (a
// node still writing its image is waited for; one that failed and left those
// states is not). After `assemble_timeout` the round starts with whoever is
// there. A round that starts with one node is a `skip`, not a pass.
//
// The round. Ranks are the members sorted by node id. Rank 0's workflow
// sends `collective_prepare` to its agent and publishes the unique id it
// answers with; every member (rank 0 too) then sends `collective_run` with
// that id and its rank to its own agent, and gets its own nccl_multinode
// check back. Each workflow only ever commands its own node's agent, so the
// broker's one-command-per-node rule and each operation's lock still hold.
//
// Failure. Whatever goes wrong in a round (rank 0 cannot start the
// collective or gives no id in time, a peer never connects, the data comes
// back wrong) is a `fail` check on every member that ran into it, with the
// reason and the members in its details: a collective cannot say which end
// was at fault, so the gate quarantines them all and the reports say why.
// Only losing the node (abort, timeout: kConflict) or kilnd shutting down
// (kUnavailable) are errors.
//
// A member that retries (a numeric miss) joins the next round. Members whose
// round passed are on their way to active and are not waited for; members
// whose round failed are, until they rejoin or leave validating.
//
// Threading: call from any I/O thread; state is under one mutex, never held
// across a co_await. Waits poll every poll_interval (also for shutdown()).

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <atomic>
#include <set>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/blocking_pool.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/agent/agent_broker.h"
#include "controller/store/store.h"

namespace kiln {

struct CollectiveOptions {
  // "nccl" (kiln-gpucheck --multinode) or "tcp" (test-only: proves the
  // rendezvous without GPUs; its checks say so in details.collective).
  std::string collective = "nccl";
  // How long a member waits for the rest of its allocation to join.
  std::chrono::milliseconds assemble_timeout{std::chrono::minutes(10)};
  // How long rank 0 may take to answer collective_prepare.
  std::chrono::milliseconds prepare_timeout{std::chrono::minutes(3)};
  // timeout_s told to the agents; kilnd waits this plus a minute for a run.
  int run_timeout_s = 600;
  int iterations = 5;
  int max_mib = 0;  // largest all-reduce; 0 = 1024 for nccl, 64 for tcp
  std::chrono::milliseconds poll_interval{200};
};

struct MultinodeRequest {
  std::string node_id;
  std::string allocation;  // "" = the node is in none: the check is skipped
  nlohmann::json profile;  // the node's profile document
  StillHeld still_held;    // the validating operation still holds the node
};

class CollectiveRendezvous {
 public:
  CollectiveRendezvous(AgentBroker& broker, NodeStore& store, BlockingPool& db, CollectiveOptions options,
                       Logger log);

  // Whether `profile` asks for nccl_multinode: plans.quick lists it or
  // thresholds.nccl_multinode_busbw_gbps_min is set.
  static bool wanted(const nlohmann::json& profile);

  // Runs this node's part of its allocation's round; returns its
  // nccl_multinode check (pass, fail or skip). Errors: kConflict (the node
  // was lost), kUnavailable (shutdown).
  asio::awaitable<Result<nlohmann::json>> run_check(MultinodeRequest request);

  // Ends every wait promptly (kUnavailable). Idempotent; thread-safe.
  void shutdown();

  const CollectiveOptions& options() const { return opt_; }

 private:
  struct Round {
    std::string run_id;
    std::set<std::string> joined;   // node ids
    bool started = false;
    std::vector<std::string> ranks;   // the members in rank order, once started
    std::vector<std::string> absent;  // expected but not there when it started
    std::string unique_id;            // from rank 0's collective_prepare
    std::string prepare_error;        // why rank 0 gave none
  };
  struct Group {
    std::shared_ptr<Round> open;  // the round members join now
    std::set<std::string> done;   // passed (or skipped) a round: on the way to active, not waited for
  };

  std::shared_ptr<Round> join(const std::string& allocation, const std::string& node_id);
  void leave(const std::string& allocation, const std::string& node_id, const std::shared_ptr<Round>& round);
  void finish(const std::string& allocation, const std::string& node_id, const nlohmann::json& check);
  // The allocation's nodes in deploying or validating.
  asio::awaitable<Result<std::set<std::string>>> members(std::string allocation);
  // Starts `round` when every expected member joined or `force`; true once started.
  bool maybe_start(const std::string& allocation, const std::shared_ptr<Round>& round,
                   const std::set<std::string>& expected, bool force);

  asio::awaitable<Result<nlohmann::json>> wait_for_round(MultinodeRequest& req, std::shared_ptr<Round> round);
  asio::awaitable<Result<nlohmann::json>> run_round(MultinodeRequest& req, std::shared_ptr<Round> round);

  // One poll interval; kUnavailable on shutdown, kConflict once the node is lost.
  asio::awaitable<Status> pause(const MultinodeRequest& req);

  nlohmann::json command_args(const Round& round, const nlohmann::json& profile) const;

  AgentBroker& broker_;
  NodeStore& store_;
  BlockingPool& db_;
  const CollectiveOptions opt_;
  Logger log_;
  std::atomic<bool> shutdown_{false};

  std::mutex mu_;
  std::map<std::string, Group> groups_;  // by allocation id
};

// The nccl_multinode check shapes kilnd makes itself (no agent involved).
nlohmann::json multinode_skip(const std::string& reason);
nlohmann::json multinode_fail(const std::string& reason, const nlohmann::json& threshold);

}  // namespace kiln
