#pragma once
// Conductor: runs node operations (provision verbs, power actions) and the
// periodic jobs that keep nodes honest (timeouts).
//
// Locking. At most one operation holds a node, recorded in the node's
// `reservation` column (an operation id). The reservation is taken by the same
// conditional update that moves the node into its transient state, so the
// check "is the verb allowed in this state and is the node free" and the move
// are one transaction: two concurrent verbs cannot both win. Every later write
// by the operation is conditional on still holding the reservation, so an
// operation that was aborted, or timed out, discovers it on its next write and
// stops without touching the node. Every path out of an operation (done, fail,
// abort, timeout, restart) clears the reservation in the same write that puts
// the node in a stable state.
//
// Timeouts. Entering a transient state sets `deadline_at`; a job moves
// nodes past their deadline to the state's failed state with last_error
// "timed out after Ns in <state> (step <step>)", or the step's own sentence
// where its wait has a likelier cause (late_step_reason,
// controller/model/steps.h: "the OS did not phone home within Ns: ...").
// The job sleeps until the earliest deadline in the store (one index
// look-up after each sweep), woken sooner by a node this conductor writes
// or reads with an earlier one, and by membership view changes; it looks
// again at least every full_pass_interval, which bounds what a missed
// wake-up costs. With nothing in a transient state, an idle conductor makes
// no store call between those passes (timeout_job.cc).
//
// Restart and takeover. An operation's id is "<conductor id>/<uuid>": the
// reservation names the conductor running it (runner_of, membership.h).
// start() and, with a Membership, every view change that may have moved
// ownership (membership.h, on_change) and every full pass of the timeout
// job look at the nodes in flight that this instance owns (on the ring) whose runner is not alive: a
// previous process of this kilnd, or another conductor that stopped or went
// silent. Wait states (cleaning, burning_in, deploying, validating) are
// resumed here under a new operation id, keeping their deadline; the others
// are moved to their failed state with a reason ("kilnd restarted while ...",
// or "conductor <id> (<host>) stopped heartbeating while ..."); interrupted
// power actions are cleared with a reason. Each takeover is the conditional
// write on the old reservation, so of two instances that both believe they
// own a node (their views differ for a moment), exactly one takes it and the
// operation never runs twice. Whether a runner lives is read from the store
// after the nodes, not from the (up to a heartbeat old) view, so a conductor
// that just joined and resumed nodes is never mistaken for a dead one.
//
// Ownership. With a Membership, each node has an owner on the ring (keyed by
// its allocation while it has one: ownership_key, membership.h), which runs
// its provisioning flows, deadline sweep, power sync and takeover. A verb
// taken by another instance is checked and written there (the node's
// transient state and a reservation whose id names the owner, in one
// conditional write, so the caller gets its answer at once), and the owner
// starts it: woken by the event (kick()), or at its next adoption pass
// (every timeout_check_interval between conductors) at worst.
// Power actions and on-demand validations run where they were asked for.
// Without a membership (tests, tools) this instance owns every node, and
// takeover happens at start() only.
//
// Threading: public coroutines run on the io_context's executor; store calls
// go through the BlockingPool.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/crypto.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/conductor/deploy_hooks.h"
#include "controller/conductor/power_sync.h"
#include "controller/model/node.h"
#include "controller/model/state_machine.h"
#include "drivers/driver.h"

namespace kiln {

class Membership;  // membership.h
class NodeStore;   // controller/store/store.h

// Who asked, for events and logs.
struct Actor {
  std::string token_id;
  std::string name;
  std::string role;
  std::string request_id;
};

struct ProvisionArgs {
  std::string image;       // deploy: image id or name
  // deploy: the allocation the node joins (its nodes validate nccl_multinode
  // together, controller/agent/collective_rendezvous.h); undeploy clears it.
  std::string allocation;
};

struct ConductorOptions {
  // How long a node may sit in a transient state before it is failed. The
  // design default is 30 minutes: long enough for a slow BMC plus a full
  // ramdisk boot and burn-in on a big node.
  std::chrono::milliseconds default_timeout{std::chrono::minutes(30)};
  // Per-state overrides (e.g. verifying: 5 minutes).
  std::map<ProvisionState, std::chrono::milliseconds> timeouts;
  // How soon a pass of the periodic job that failed (the store could not be
  // read) is tried again; and, between conductors sharing a store (a
  // membership that is not sole), how often the adoption pass looks for
  // operations handed to this one whose event it missed. Deadlines do not
  // wait for it: the job wakes at the earliest one.
  std::chrono::milliseconds timeout_check_interval{std::chrono::seconds(2)};
  // The longest the periodic job sleeps: a full pass (late nodes, the next
  // deadline re-read, takeover, adoption) at least this often, so a wake-up
  // that never came (a deadline written by another instance whose operation
  // no one here reads) costs at most this much lateness.
  std::chrono::milliseconds full_pass_interval{std::chrono::seconds(60)};
  // The conductor prefix of operation ids when there is no membership.
  std::string instance_id = "kilnd";
  // This kilnd among the conductors sharing the store (membership.h);
  // started before start(). Null: this instance owns every node. Not owned;
  // must outlive the Conductor.
  Membership* membership = nullptr;
  // The periodic power-state sweep (interval 0 disables it).
  PowerSyncOptions power_sync;
  // The allocation a deploying node's config drive takes its SSH keys and
  // user data from (workflow.h). Empty: drives without keys.
  TenantAccessLookup tenant_access;
  // A node's own config drive, given with its deploy (workflow.h; the
  // Ironic API's configdrive). Empty: config drives come from allocations.
  OwnConfigDriveOf own_config_drive;
  // The deploy's phone-home URL a config drive carries (workflow.h). Empty:
  // drives without phone_home (kilnd then learns no SSH host keys).
  PhoneHomeLookup phone_home;
  // What a deploy of an image whose OS runs no kiln-agent waits on after the
  // reboot (workflow.h; AgentBroker::wait_for_phone_home). Empty: such a
  // deploy fails at that step, saying why.
  PhoneHomeWait phone_home_wait;
};

class Conductor {
 public:
  // The whole store: operations touch nodes, images and profiles, validation
  // reports, allocations (tenant access) and the conductor rows (takeover).
  Conductor(asio::io_context& io, NodeStore& store, BlockingPool& db, const DriverRegistry& drivers,
            const SecretBox& secrets, const Clock& clock, ConductorOptions options, Logger log);
  ~Conductor();

  // Takes over the nodes this instance owns that were left in flight by a
  // previous process or a dead conductor, then starts the periodic jobs.
  // Call once, before serving requests (and after the membership started).
  asio::awaitable<Status> start();
  // Stops periodic jobs; running operations are abandoned where they are and
  // are recovered by the next start() (they hold reservations in the store).
  void stop();

  // Applies an operator verb. On success the node has already moved (its
  // transient state and reservation are written) and the returned node shows
  // that; the work continues in the background. Errors: kNotFound,
  // kInvalidArgument (bad args, e.g. deploy without a usable driver),
  // kConflict ("node is busy", "cannot <verb> a node in state <s>",
  // "node is in maintenance").
  asio::awaitable<Result<Node>> provision(std::string node, ProvisionEvent verb, ProvisionArgs args,
                                          Actor actor);

  // Starts a power action; same contract as provision(). The node shows
  // target_power_state until the action completes.
  asio::awaitable<Result<Node>> power(std::string node, PowerAction action, Actor actor);

  // Runs validation plan `plan` ("quick" | "full") on the node now, phase
  // on_demand (validation_runs.h): takes the node's reservation and returns
  // the node; the run continues in the background, stores its report, points
  // last_validation at it and frees the node. The provision state never
  // changes. kNotFound; kConflict with the reason (busy, no profile, a state
  // or driver that cannot run it now).
  asio::awaitable<Result<Node>> validate_now(std::string node, ValidationPlan plan, Actor actor);

  // Checks a BMC block against its driver without I/O (for create/PATCH).
  // kInvalidArgument naming the field ("/bmc/driver", "/bmc/address").
  Status validate_bmc(const BmcInfo& bmc) const;

  // Operations run so far, by (kind, result): ("deploy","success") -> 3. The
  // kind is the verb, or the state an operation was resumed or adopted in
  // ("deploying"): this process never saw its verb.
  std::map<std::pair<std::string, std::string>, uint64_t> operation_counts() const;
  // Operations currently running in this process.
  std::size_t running_operations() const;

  // The power-state sweep (started by start()).
  PowerSync& power_sync();

  // One deadline sweep and one takeover pass now, as the periodic job does
  // (tests step it with this). Without a membership the takeover pass does
  // nothing (there is no other conductor to take over from).
  asio::awaitable<void> sweep_once();

  // Store calls the periodic job has made since construction (deadline
  // reads, takeover and adoption passes): tests check that an idle
  // conductor makes none. Any thread.
  uint64_t job_store_calls() const;

  // Something was written to the store (an event): operations handed to this
  // conductor by another instance are looked for soon. Cheap, any thread;
  // a no-op without a membership or for a sole kilnd.
  void kick();

  // The membership given in the options; null when none.
  const Membership* membership() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln
