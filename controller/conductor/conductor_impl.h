#pragma once
// Conductor's insides, shared by the files that implement it; not part of its
// interface (include conductor.h):
//
//   conductor.cc   the facade, entering states and their events
//   timeout_job.cc the periodic job: deadline sweeps, takeover and adoption
//                  passes, and what wakes them
//   operations.cc  verbs, power actions and on-demand validation, and the
//                  operations they start in the background
//   recovery.cc    taking over the nodes a previous process or a dead conductor
//                  left in flight
//   node_hold.h    whether an operation still holds its node
//
// Every coroutine here runs on the io_context; store calls go through the
// BlockingPool. Impl lives in a shared_ptr: a background operation keeps it
// alive (shared_from_this) until it ends.

#include <atomic>
#include <cstdint>
#include <limits>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <nlohmann/json.hpp>

#include "controller/conductor/conductor.h"
#include "controller/conductor/membership.h"
#include "controller/conductor/node_hold.h"
#include "controller/conductor/workflow.h"
#include "controller/store/store.h"

namespace kiln {

struct Conductor::Impl : std::enable_shared_from_this<Conductor::Impl> {
  Impl(asio::io_context& io_, NodeStore& store_, BlockingPool& db_, const DriverRegistry& drivers_,
       const SecretBox& secrets_, const Clock& clock_, ConductorOptions opt_, Logger log_)
      : io(io_), store(store_), db(db_), drivers(drivers_), secrets(secrets_), clock(clock_),
        opt(std::move(opt_)), log(std::move(log_)), job_strand(asio::make_strand(io_)), timeout_timer(job_strand),
        power_sync(io_, store_, db_, drivers_, secrets_, owned_power_sync(opt), log.with("job", "power_sync")),
        holds(store_, db_, stopped) {}

  asio::io_context& io;
  NodeStore& store;
  BlockingPool& db;
  const DriverRegistry& drivers;
  const SecretBox& secrets;
  const Clock& clock;
  ConductorOptions opt;
  Logger log;
  // The periodic job's loop and its timer run here; every wake-up posts the
  // timer's cancel here, so a cancel cannot slip between the loop's look at
  // what is due and the start of its wait (timeout_job.cc).
  asio::strand<asio::io_context::executor_type> job_strand;
  asio::steady_timer timeout_timer;
  // The clock time (ms) after which a deadline sweep is due: the earliest
  // deadline this conductor knows of (read from the store after each sweep,
  // or seen on a node an operation of this process read or wrote), or when
  // a failed sweep is retried. kNoDeadline: none. Lowered from any thread
  // (note_deadline).
  static constexpr int64_t kNoDeadline = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> deadline_due{kNoDeadline};
  // Set by a membership view change (ownership may have moved): a full pass
  // is due at once.
  std::atomic<bool> view_changed{false};
  // Store calls made by the periodic job and the passes it shares with
  // start() and kick() (deadline reads, takeover, adoption), for tests: an
  // idle conductor makes none.
  std::atomic<uint64_t> job_store_calls{0};
  PowerSync power_sync;
  std::atomic<bool> stopped{false};
  // The clock when start() began: conductors dead before it were handled by
  // the start-up takeover (recovery.cc).
  int64_t started_at_ms = 0;
  std::atomic<std::size_t> running{0};
  mutable std::mutex counts_mu;
  std::map<std::pair<std::string, std::string>, uint64_t> counts;
  // Whether each running operation still holds its node: an abort or a
  // timeout taken in this process clears it at once, so waits on the node's
  // agent (HeldCheck) end within a poll instead of at the deadline.
  NodeHolds holds;
  // The provisioning operations running in this process, by id: an operation
  // is started at most once here, whichever path (verb, takeover, adoption)
  // gets to it first.
  std::mutex live_mu;
  std::set<std::string> live_ops;
  // The adoption pass (adopt_handed_over): running, and asked for again.
  std::atomic<bool> adopt_running{false}, adopt_again{false};
  // Every event up to this seq was looked through for a handover to this
  // conductor by handover_published (-1: nothing yet). Its passes run one at
  // a time (kick_adoption), so only they touch it.
  int64_t handover_checked_seq = -1;

  // --- conductor.cc: states, events, counters, the timeout job ---

  int64_t timeout_ms(ProvisionState s) const;
  // Power sync limited to the nodes this instance owns (when it has a
  // membership and the options name no other filter).
  static PowerSyncOptions owned_power_sync(const ConductorOptions& o);
  // Whether this instance acts as the owner of `node_id` now.
  bool owns(std::string_view node_id) const;
  // A fresh operation id, "<this conductor>/<uuid>" (runner_of reads it).
  std::string new_op_id() const;
  // A fresh id for an operation on `node` (as it will be once the verb's
  // write is done): named for the node's owner on the ring, which runs it;
  // this conductor when it owns the node, has no membership, or sees no
  // live owner.
  std::string new_op_id_for(const Node& node) const;
  // This conductor's id (the prefix of the operations it runs).
  std::string self_id() const;
  // One deadline sweep, takeover pass and adoption pass, now (sweep_once).
  asio::awaitable<void> sweep();
  void count(const std::string& op, const std::string& result);
  // The node as a running operation reads it: retried while the store is
  // unreachable or full, as write() retries, since an operation that gave up
  // here would leave its node held by nothing that runs.
  asio::awaitable<Result<Node>> read_held(std::string id);
  // Sleeps `pause` (doubled up to 2 s for the next call) unless stopped.
  asio::awaitable<void> store_backoff(std::chrono::milliseconds& pause);
  asio::awaitable<Result<Node>> write(std::string id, NodeCondition cond, std::function<Status(Node&)> mutate,
                                      std::vector<EventDraft> events);
  // Enters `to` (transient or stable) from inside a mutate function.
  void enter(Node& n, ProvisionState to);
  static EventDraft transition_event(const Node& before, ProvisionState to, nlohmann::json detail,
                                     const std::string& request_id);
  // Moves the transient node `n` (as read, still under the hold it has) to
  // its failed state with `reason` as last_error and one transition event
  // whose outcome is `outcome` ("timeout", "restart"). Whether it was
  // written: false when the node moved on or another holder has it.
  asio::awaitable<bool> fail_transient(Node n, std::string outcome, std::string reason);

  // --- timeout_job.cc: the periodic job ---

  // What one check_timeouts found.
  enum class LateNodes { kDone, kMore, kFailed };
  // Moves the nodes this instance owns whose deadline is before `now_ms` to
  // their failed state, at most one batch: kMore when a full batch was
  // handled and more may be late, kFailed when the store could not be read.
  asio::awaitable<LateNodes> check_timeouts(int64_t now_ms);
  // Sweeps every late node, then sets deadline_due to the next deadline in
  // the store (or a retry). `in_loop`: called by the loop, which plans its
  // own sleep, or by start() before the loop (anyone else wakes the loop
  // when the next deadline is sooner than the one it sleeps for).
  asio::awaitable<void> deadline_pass(bool in_loop);
  // Lowers deadline_due to `due_ms`; `wake`: and wakes the loop when it did.
  void lower_deadline_due(int64_t due_ms, bool wake);
  // A node read or written with this deadline (0: none): the loop wakes for
  // it if it is the earliest known. Cheap; any thread.
  void note_deadline(int64_t deadline_ms);
  // The membership published a view that may move ownership. Any thread.
  void membership_changed();
  // Ends the loop's current wait (it then looks at what is due). Any thread.
  void wake_job();
  asio::awaitable<void> timeout_loop();

  // --- operations.cc: what the public calls start ---

  asio::awaitable<Result<Node>> provision(std::string node, ProvisionEvent verb, ProvisionArgs args, Actor actor);
  asio::awaitable<Result<Node>> power(std::string node, PowerAction action, Actor actor);
  // On-demand validation (Conductor::validate_now; validation_runs.h).
  asio::awaitable<Result<Node>> validate_now(std::string node, ValidationPlan plan, Actor actor);
  // Runs run_operation in the background; a crash fails the node with the
  // reason. False (and nothing started) when `op_id` already runs here.
  bool spawn_operation(std::string op_id, std::string node_id, std::string kind, std::string request_id);
  // Moves a node held by `op_id` to its failed state (used when an operation
  // crashes). Quietly does nothing when the node is no longer held by it.
  asio::awaitable<void> fail_held(std::string op_id, std::string node_id, std::string reason,
                                  std::string request_id);
  // Drives a node held by `op_id` from its current transient state until it
  // reaches a stable state or the operation loses the node.
  asio::awaitable<void> run_operation(std::string op_id, std::string node_id, std::string kind,
                                      std::string request_id);
  // Records `step` on the node while `op_id` holds it (in `state`, when
  // given); false once the operation lost the node.
  SetStep step_recorder(std::string node_id, std::string op_id, std::optional<ProvisionState> state);
  // The provision.step event recording that `node_id` started `step` (a plain
  // function: JSON is not built inside coroutines).
  static std::vector<EventDraft> step_events(const std::string& node_id, const std::string& step,
                                             const std::string& op_id);
  asio::awaitable<void> run_on_demand(std::string op_id, std::string node_id, ValidationPlan plan,
                                      nlohmann::json profile_doc, std::string request_id);
  // The agent writes the image to disk, so it must be a catalogued os image
  // (ramdisk images are what the agent itself boots). 400 naming /image.
  asio::awaitable<Status> check_os_image(std::string ref);
  asio::awaitable<void> run_power(std::string op_id, std::string node_id, PowerAction action,
                                  std::string request_id);

  // --- recovery.cc ---

  // Takes over the owned nodes in flight whose runner is not alive
  // (conductor.h, "Restart and takeover"). `at_start`: without a
  // membership, every node in flight is a previous process's; with one, the
  // pass is the same at start and on every view change and full pass.
  asio::awaitable<Status> take_over(bool at_start);
  // Takes over one node, with `cause` ("kilnd restarted", "conductor <id>
  // (<host>) stopped heartbeating") opening the reasons written. Counts into
  // the three counters.
  asio::awaitable<void> take_over_node(Node n, std::string cause, std::string outcome, int& resumed, int& failed,
                                       int& power);
  // Starts the provisioning operations another instance handed to this one:
  // a verb taken by a non-owner writes the reservation with an id naming the
  // owner (new_op_id_for) and starts nothing; the owner finds the node in
  // flight, named for it, and not running here.
  asio::awaitable<void> adopt_handed_over();
  // Whether the events published since the last look may hand this conductor
  // an operation, so that an event-driven pass need not read the nodes: true
  // when one of them names an operation of this conductor (a verb taken
  // elsewhere writes its transition with detail.op "<owner>/<op id>"), when
  // more were published than it reads, when they cannot be read, and on the
  // first look.
  asio::awaitable<bool> handover_published();
  // Runs adopt_handed_over soon, once for any number of calls meanwhile.
  // Does nothing for a sole kilnd or without a membership (nothing is ever
  // handed over there). Any thread.
  void kick_adoption();
};

}  // namespace kiln
