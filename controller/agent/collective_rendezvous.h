#pragma once
// CollectiveRendezvous: kilnd as the rendezvous of the nccl_multinode check
// (the agent side is docs/agent-protocol.md, "Multi-node
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
// check back; it then waits for the others' checks, because whether anyone
// is judged (see "Failure") depends on all of them. Each workflow only ever commands its own node's agent, so the
// broker's one-command-per-node rule and each operation's lock still hold.
//
// Failure. Whatever goes wrong in a round (rank 0 cannot start the
// collective or gives no id in time, a peer never connects, the data comes
// back wrong, a figure under the floor) is a `fail` check, with the reason
// and the members in its details. A collective cannot say which end was at
// fault, so a failed round of three or more members looks for the bad
// member before anyone is judged ("isolation"): up to kIsolationPhases
// phases of pair rounds, the pairs of one phase disjoint so that they run at
// once. The first phase pairs the members in rank order (an odd one out
// waits); each later one pairs every member that is still undecided with a
// member that passed a pair round, or, while none has, with another
// undecided member it has not been paired with. A member that passes a pair
// round is cleared; one that never passed and failed with a cleared member is
// at fault. Then:
//   - a member at fault gets a `fail` naming the rounds it failed and with
//     whom, its figures in details but `value` null: it has already been
//     measured again (the retry a numeric miss would get), and retried alone
//     it would only get a skip, so the gate quarantines it at once;
//   - when some member is at fault (or left the round), a cleared member
//     gets its passing pair round's check (a pair's figure);
//   - every other member, and every member when nobody was found at fault
//     (every pair passed: the failure needs the whole set), keeps its check
//     from the round of all, as before isolation existed, with what the pair
//     rounds showed.
// Two members cannot be told apart (their only pair is the round itself), so
// both keep their failures, as does a member the phases did not decide.
// Bounds: at most kIsolationPhases phases of at most floor(n/2) pair rounds,
// so a member runs at most 1 + kIsolationPhases collectives; a pair round
// gets prepare_timeout and run_timeout_s divided by kIsolationPhases, so the
// isolation as a whole takes about one more round's time. Every check of an
// isolated round carries details.isolation (the pair rounds, who was
// cleared, who is at fault). Only losing the node (abort, timeout: kConflict)
// or kilnd shutting down (kUnavailable) are errors.
//
// A member that retries (a numeric miss) joins the next round. Members whose
// round passed are on their way to active and are not waited for; members
// whose round failed are, until they rejoin or leave validating.
//
// Several kilnd (docs/scale-out.md). The rounds live in this process's
// memory, which is enough because every member's workflow runs here: the
// nodes of one allocation share the allocation's owner on the conductor ring
// (ownership_key, membership.h), and a verb taken by another instance is
// handed to that owner. When the owner dies, the new one resumes the
// members' validating states and a fresh round assembles there.
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
#include "controller/store/node_repo.h"

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
  int max_mib = 0;  // largest all-reduce; 0 = 1024 for nccl, 8 for tcp (it proves the rendezvous, not a fabric)
  std::chrono::milliseconds poll_interval{200};
};

// How many phases of pair rounds a failed round may run to find its bad
// member: three decide one bad member among any number (three members need
// all three pairs when the first pair holds the bad one; with four or more,
// the bad one and its first partner each meet a cleared member by the third).
inline constexpr int kIsolationPhases = 3;

struct MultinodeRequest {
  std::string node_id;
  std::string allocation;  // "" = the node is in none: the check is skipped
  nlohmann::json profile;  // the node's profile document
  StillHeld still_held;    // the validating operation still holds the node
};

class CollectiveRendezvous {
 public:
  CollectiveRendezvous(AgentBroker& broker, NodeRepo& store, BlockingPool& db, CollectiveOptions options,
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
  // One collective: the round of every member, or one pair round of the isolation.
  struct Run {
    std::string run_id;
    std::vector<std::string> ranks;                // its members in rank order
    std::string unique_id;                         // from rank 0's collective_prepare
    std::string prepare_error;                     // why rank 0 gave none
    std::map<std::string, nlohmann::json> checks;  // each member's check, once it has one
  };
  struct Round {
    std::set<std::string> joined;     // node ids
    bool started = false;
    std::vector<std::string> ranks;   // the members in rank order, once started
    std::vector<std::string> absent;  // expected but not there when it started
    // phases[0] holds the run of every member; each later phase the pair
    // runs of the isolation. A phase ends when each of its runs has every
    // live member's check, or at its deadline (a missing check is a failure).
    std::vector<std::vector<std::shared_ptr<Run>>> phases;
    std::vector<std::chrono::steady_clock::time_point> phase_deadlines;
    std::set<std::string> gone;       // members that left during the round (lost, shutdown)
    bool decided = false;             // no phase follows the last one
  };
  struct Group {
    std::shared_ptr<Round> open;  // the round members join now
    std::set<std::string> done;   // passed (or skipped) a round: on the way to active, not waited for
  };
  // What one run may take: the round of all gets the options' figures, a pair round a share.
  struct RunLimits {
    std::chrono::milliseconds prepare;
    int run_s;
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
  // Runs every phase this node takes part in and returns its verdict.
  asio::awaitable<Result<nlohmann::json>> run_round(MultinodeRequest& req, std::shared_ptr<Round> round);
  // This node's part in one collective: its own check, without the round's details.
  asio::awaitable<Result<nlohmann::json>> run_collective(MultinodeRequest& req, std::shared_ptr<Run> run,
                                                         RunLimits limits);
  // The node left `round` (an error): nobody waits for its checks or its unique id.
  void depart(const std::shared_ptr<Round>& round, const std::string& node_id);
  // Under mu_: plans the phase after the last one, or decides there is none.
  void plan_next_phase(Round& round);
  RunLimits limits_of(std::size_t phase) const;

  // What the pair rounds so far say. Pure functions of the round, called under mu_.
  struct Evidence {
    std::set<std::string> cleared;       // passed a pair round
    std::set<std::string> at_fault;      // never passed one, and failed one with a cleared member
    std::set<std::string> tried;         // pairs that ran, as "a\nb" with a < b
    std::vector<std::string> undecided;  // live members that are neither, in rank order
  };
  // Whether `run` failed: a member's check failed, or a member has none.
  static bool run_failed(const Run& run);
  static Evidence weigh(const Round& round);
  // The next phase's pairs (see "Failure" above); empty when none can help.
  static std::vector<std::vector<std::string>> next_pairs(const Round& round, const Evidence& ev);
  // This node's check once the round is decided.
  static nlohmann::json verdict_of(const Round& round, const std::string& node_id, const std::string& allocation,
                                   const nlohmann::json& threshold);

  // One poll interval; kUnavailable on shutdown, kConflict once the node is lost.
  asio::awaitable<Status> pause(const MultinodeRequest& req);

  nlohmann::json command_args(const Run& run, const nlohmann::json& profile, int timeout_s) const;

  AgentBroker& broker_;
  NodeRepo& store_;
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
