#pragma once
// Membership: this kilnd as one conductor among those sharing the database,
// and the ring that says which of them owns each node.
//
// start() registers this process under a fresh id (ConductorStore), then a
// loop heartbeats every heartbeat() (2 s among peers) and re-reads every
// registration.
// A conductor is alive while its row is not stopped and its last heartbeat is
// at most `timeout` old; after each read the ring (hash_ring.h) is rebuilt
// over the live ones and published as an immutable RingView. Every instance
// computes the same ring from the same rows, so they agree on each node's
// owner without talking to one another (for the moment after a change, two
// views may differ: the owner's work is still safe, because every write it
// makes is conditional on the node's reservation or version).
//
// The owner of a node runs its periodic work: the deadline sweep, power sync,
// taking over operations whose runner died (conductor.h). A conductor that
// cannot heartbeat (store down, or the process stalled) for longer than
// `timeout` is dead to the others, so it stops acting as an owner itself at
// that moment (RingView::is_mine() answers false) until a heartbeat goes
// through again; otherwise it and the node's new owner would both act.
//
// Alone (`sole`: SQLite, one kilnd per data directory, held by
// store/data_dir_lock.h) no other conductor exists to count this one dead
// and take its nodes, so the heartbeat has no failure to detect: the process
// answering is alive. This conductor's own view then always acts, and it is
// alive in its views (GET /v1/conductors) whatever its heartbeat's age; the
// heartbeat only keeps `last_heartbeat_at` recent, so by default it comes
// once a minute instead of every 2 s (an idle kilnd stays idle). A
// registration marked stopped by someone else still ends acting for good.
//
// Previous processes. A restarted kilnd registers with the same host and API
// URL, which marks its previous registration stopped (its operations are
// taken over at once). With `sole`, every other running registration is
// marked stopped at start: whoever wrote it is a process that is gone.
//
// View changes. Ownership moves only when the view changes: a conductor
// joins, stops or goes silent, or this one acts again after it could not
// heartbeat. on_change() listeners hear of each such view as it is
// published, so the jobs that act on ownership (the conductor's takeover
// of a dead conductor's nodes, its deadline sweep) run then, instead of
// polling a view that nearly never changes.
//
// stop() marks the registration stopped (a clean shutdown: the others take
// the nodes over at their next refresh, without waiting for the timeout).
// Destroying a Membership without stop() leaves the row to time out, as a
// crash would.
//
// Threading: the loop and the coroutines run on the io_context; refreshes
// take turns on a strand of it (never two at once); store calls go through
// the BlockingPool. view() and id() are safe from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/conductor/hash_ring.h"
#include "controller/model/node.h"
#include "controller/model/ring_position.h"
#include "controller/store/conductor_store.h"

namespace kiln {

struct MembershipOptions {
  // What this conductor registers: the machine's host name and the URL its
  // API is reached at (shown in GET /v1/conductors; with the host, how a
  // restarted process recognises its previous registration).
  std::string host;
  std::string api_url;
  // How often this conductor heartbeats and re-reads the others; unset: the
  // default for its mode (heartbeat()). An operator's explicit setting wins
  // in both modes.
  std::optional<std::chrono::milliseconds> heartbeat_interval;
  // Among peers: a few heartbeats fit in one timeout, so one slow write is
  // not a death.
  static constexpr std::chrono::milliseconds kPeerHeartbeat{std::chrono::seconds(2)};
  // Alone: nobody judges this heartbeat, it only keeps GET /v1/conductors'
  // last heartbeat recent (and notices a registration stopped by someone
  // else), so it comes as rarely as the other once-a-minute jobs.
  static constexpr std::chrono::milliseconds kSoleHeartbeat{std::chrono::seconds(60)};
  // Silence after which a conductor is dead and its nodes move: long enough
  // to ride out a store fail-over, short enough that stuck nodes are rare.
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
  // This is the only kilnd on the database (SQLite): other registrations are
  // previous processes, stopped at start, and this one acts and is alive
  // whatever its heartbeat's age (the top of this file).
  bool sole = false;
  int virtual_points = HashRing::kDefaultVirtualPoints;

  // The heartbeat period in effect: heartbeat_interval when set, else the
  // default for the mode.
  std::chrono::milliseconds heartbeat() const {
    return heartbeat_interval.value_or(sole ? kSoleHeartbeat : kPeerHeartbeat);
  }
};

// One registration as a view shows it.
struct ConductorState {
  ConductorRecord record;
  bool alive = false;
};

// An immutable snapshot of the membership: safe to share across threads.
class RingView {
 public:
  // `self_beat_at`: this process's clock when its own heartbeat last went
  // through, 0 when it may not act (not registered yet, or its registration
  // was stopped by someone else). `sole`: MembershipOptions::sole.
  RingView(std::string self, std::vector<ConductorState> conductors, HashRing ring, int64_t self_beat_at,
           std::chrono::milliseconds timeout, bool sole, const Clock* clock)
      : self_(std::move(self)), conductors_(std::move(conductors)), ring_(std::move(ring)),
        self_beat_at_(self_beat_at), timeout_ms_(timeout.count()), sole_(sole), clock_(clock) {}

  const std::string& self() const { return self_; }
  // Every registration read, live or not, by started_at.
  const std::vector<ConductorState>& conductors() const { return conductors_; }
  const HashRing& ring() const { return ring_; }
  // The live conductor owning `node_id`; nullopt when none is alive.
  std::optional<std::string> owner_of(std::string_view node_id) const { return ring_.owner(node_id); }
  // Whether this instance may act as the owner now: it owns the node on
  // the ring and acting() holds.
  bool is_mine(std::string_view node_id) const;
  // Whether this instance may act now: it is registered and, among peers,
  // its own last heartbeat went through within the timeout (alone, the
  // heartbeat's age does not matter). False for good once its registration
  // was stopped by someone else.
  bool acting() const;
  // The silence after which a conductor counts as dead (ms).
  int64_t timeout_ms() const { return timeout_ms_; }
  // Whether the conductor `id` was alive at the last refresh.
  bool is_alive(std::string_view id) const;
  // The registration of `id`, or null when it has none (never registered,
  // or forgotten).
  const ConductorRecord* find(std::string_view id) const;

 private:
  std::string self_;
  std::vector<ConductorState> conductors_;
  HashRing ring_;
  int64_t self_beat_at_;  // this process's clock when its last heartbeat succeeded
  int64_t timeout_ms_;
  bool sole_;
  const Clock* clock_;
};

class Membership {
 public:
  // `store`, `db` and `clock` must outlive this object.
  Membership(asio::io_context& io, ConductorStore& store, BlockingPool& db, const Clock& clock,
             MembershipOptions options, Logger log);
  // Ends the loop; does not mark the registration stopped (see stop()).
  ~Membership();

  // This process's conductor id (a fresh UUID), fixed at construction.
  const std::string& id() const;
  // Whether this is the only kilnd on its store (MembershipOptions::sole).
  bool sole() const;
  // Sets the API URL to register (known only once the server listens).
  // Before start() only.
  void set_api_url(std::string url);
  // Registers, reads every registration and publishes the first view, then
  // starts the heartbeat loop. Call once. Errors: the store's (the process
  // cannot run as a conductor without its registration).
  asio::awaitable<Status> start();
  // One heartbeat and re-read now, publishing a new view (the loop calls it;
  // tests call it to step time). While another refresh runs (the loop's),
  // this one waits for it to end and then runs its own: so the view
  // published when it returns was read after the call, never before (a
  // caller that steps time or registers a conductor sees the result). A
  // store error is logged and keeps the old view, whose is_mine() turns
  // false once the heartbeat is `timeout` old (among peers).
  asio::awaitable<void> refresh();
  // Ends the loop and marks the registration stopped. Blocks on the store:
  // call it from the thread that shuts down, not from an I/O thread.
  Status stop();
  // Ends the loop without writing anything: to the others this conductor
  // goes silent and is dead after the timeout, as after a crash, and this
  // view stops acting then too. view() keeps answering (Conductors holding
  // this object keep working with it). Thread-safe.
  void halt();

  // The current view; never null after start() (before it: an empty ring
  // that owns nothing).
  std::shared_ptr<const RingView> view() const;

  // Calls `listener` after each refresh that publishes a view whose
  // registrations differ from the last one's (a conductor registered, or
  // forgotten), or in which one's liveness changed (joined, stopped, went
  // silent), or which acts where the last one could not (this conductor's
  // heartbeat went through again after `timeout`); not after a refresh
  // that changed none of these (nearly every heartbeat). The first view
  // (start()) is not announced: whoever starts after it reads it. The
  // listener runs on the refresh's thread (an I/O thread) and must be quick
  // and thread-safe: post the work, don't do it. Any thread, any time; the
  // listener is kept for the Membership's life.
  void on_change(std::function<void()> listener);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// What places a node on the ring: its allocation's id while it has one, so
// that every node of an allocation has the allocation's owner (the
// allocation engine, the members' flows and their multi-node validation
// rendezvous all meet in one process), otherwise its own id.
// (ownership_key(id, allocation) lives in controller/model/ring_position.h,
// which the store also uses to keep each node's place on the ring.)
inline std::string_view ownership_key(const Node& n) { return ownership_key(n.id, n.allocation); }

// The conductor an operation runs on, from its id ("<conductor>/<uuid>",
// Conductor's operation ids); "" when the id carries none (operations
// written before conductors had ids): its runner is unknown, taken as gone.
std::string runner_of(std::string_view reservation);

}  // namespace kiln
