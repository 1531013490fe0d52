#pragma once
// AllocationEngine: moves allocations through their states
// (controller/model/allocation_states.h) by driving their members' nodes with
// the conductor's ordinary verbs, and releases allocations whose lease ran out.
//
// Design. The engine is level-triggered, like a Kubernetes controller: it
// judges an allocation only from what the store says now (the allocation, its
// member rows, the member nodes) and does the next thing it needs. Nothing it
// needs lives only in memory, so a kilnd killed at any point resumes where it
// was: the conductor resumes the nodes' own operations, and the first batch
// after a start reads every allocation in flight. Every write is conditional
// (a transition or a reap checks, inside its transaction, that the
// allocation still has the state and version it was judged from; a member
// leaves, or is replaced, only from the status it was read in; node verbs
// take the node's reservation), so acting on a read a few milliseconds old
// cannot undo an API call, nor act twice on what has changed since.
//
// What it does for an allocation, per state:
//   pending        -> provisioning, then as provisioning.
//   provisioning / ready
//                  members still `available` are deployed with the
//                  allocation's image and id (the validation gate's
//                  multi-node round runs across the allocation); a member in
//                  deploy_failed, quarantined, any other failed state, in
//                  maintenance, deleted, or taken away by an operator is
//                  replaced: the node is undeployed when it can be (cleaned
//                  back to the pool) and detached, and one claimable node is
//                  claimed in its place (at most `count` replacements). When
//                  none can be had the allocation fails with the reason. When
//                  every member is active, provisioning -> ready, and the
//                  members' usage rows open in the same transaction; a ready
//                  allocation that loses a member degrades to provisioning
//                  while it is replaced.
//   failed / releasing
//                  members are given back: a node still deploying is aborted,
//                  then every deployed node is undeployed (cleaning); a member
//                  leaves once its node is out of cleaning (available, or a
//                  failed state an operator must look at) or never got the
//                  image. releasing -> released when every member has left.
//                  Usage closes in the transaction that fails or releases
//                  the allocation. A verb that fails here sets last_error and
//                  is retried: never lost, never back in the pool uncleaned.
//   any state with expires_at in the past -> releasing ("lease expired").
//
// Which allocations it looks at. Work is started by the event or the
// deadline that needs it, and only for the allocations it concerns:
//   - kick(): every event the store commits kicks the engine, which reads
//     the events committed since the last it read (the store's event log,
//     in sequence order) and reconciles the in-flight allocations they name
//     (allocation events, claims) or that have one of their nodes as a
//     member (a member deployed, failed, was cleaned or deleted). The state
//     of every allocation of a batch is read with one store call, its member
//     nodes included. A kick during a batch runs one more batch after it.
//   - the earliest lease end among the allocations it drives. One that ends
//     while its allocation is being reconciled is read again when that
//     reconcile ends.
//   - a sweep, which reads every allocation in flight: at start, after a
//     store error, when the conductor ring changes (a conductor joined,
//     stopped or went silent: ownership moved, and a dead owner's
//     allocations are taken over), and `interval` after the last one while
//     an allocation it drives is still moving (not ready with every member
//     serving) or was left with something undone (a store error, a busy
//     node).
//   An allocation changed in the store without an event (kilnd writes
//   none) is seen at the next sweep, or with the next event that names it.
// Each allocation is reconciled on its own, at most one reconcile of it at a
// time: a batch does not wait for the reconciles it started, so an event for
// one allocation is acted on while another's slow verb runs. An allocation
// whose state (the allocation row, its member rows, its member nodes' rows)
// is what it was when its last reconcile left nothing undone is not
// reconciled again: a sweep or an event that changed nothing of it costs no
// reconcile. A batch whose read began before a reconcile of one of its
// allocations ended may not see that reconcile's writes: it reads the
// allocation again rather than act on it. With no allocation in flight, or
// only ready ones whose members all serve, or only another conductor's, the
// engine sleeps until a kick, a lease end or a ring change: an idle kilnd
// makes no batch.
//
// Several conductors: the engine drives only the allocations whose id this
// instance owns on the conductor ring (the conductor's Membership), so one
// conductor reaps each lease and replaces each member.
//
// Threading: the loop and the engine's bookkeeping run on a strand of the
// io_context; reconciles and every public coroutine run on the io_context;
// store calls go through the BlockingPool. kick(), stop() and the counters
// are thread-safe.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>  // before Asio (docs/coroutines.md)
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "common/blocking_pool.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/result.h"
#include "controller/conductor/conductor.h"
#include "controller/model/allocation.h"

namespace kiln {

class Membership;  // controller/conductor/membership.h

// controller/store/
class AllocationStore;
class CatalogueStore;
class EventLog;
class NodeStore;

struct AllocationEngineOptions {
  // While an allocation is moving (see "Which allocations it looks at"), a
  // sweep at least this often retries what a store error or a busy node left
  // undone. Leases end on their own deadline, kicks at once: neither waits
  // for it.
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  // The longest the loop sleeps on one timer (a lease years away is simply
  // looked at again then; with nothing due, waking makes no batch). Tests
  // shorten it to watch an idle engine wake.
  std::chrono::milliseconds longest_sleep{std::chrono::hours(24)};
  // The conductor's Membership (ConductorOptions::membership, which must be
  // the same), whose ring changes start a sweep: ownership moves only then.
  // Null without one (a sole kilnd without a ring, tools, tests).
  Membership* membership = nullptr;
};

// The store aggregates the engine uses; each must outlive it.
struct AllocationEngineStores {
  AllocationStore& allocations;  // allocations, members, the usage ledger
  EventLog& events;              // the events it follows
  CatalogueStore& catalogue;     // profiles: prices, virtual guests
};

// Bounds (ms) of the time-to-ready histogram, request to ready.
inline constexpr int64_t kTimeToReadyBucketsMs[] = {1000, 5000, 15000, 60000, 300000, 900000, 1800000, 3600000};

struct TimeToReady {
  std::vector<uint64_t> buckets;  // cumulative counts per kTimeToReadyBucketsMs bound
  uint64_t count = 0;
  int64_t sum_ms = 0;
};

class AllocationEngine {
 public:
  AllocationEngine(asio::io_context& io, AllocationEngineStores stores, BlockingPool& db, Conductor& conductor,
                   const Clock& clock, AllocationEngineOptions options, Logger log);
  // The same, every aggregate from kilnd's one store.
  AllocationEngine(asio::io_context& io, NodeStore& store, BlockingPool& db, Conductor& conductor,
                   const Clock& clock, AllocationEngineOptions options, Logger log);
  ~AllocationEngine();

  // Starts the loop (call after the conductor's start()). stop() ends it
  // after the batch in progress (reconciles already begun run to their
  // end); allocations carry on at the next start.
  void start();
  void stop();
  // Asks for a batch now (a new allocation, a release, a member moved): wakes
  // the loop's timer, or queues one more batch after the one running.
  // Thread-safe, cheap (called on every event the store commits).
  void kick();

  // Moves the allocation to releasing (DELETE, or the reaper with "lease
  // expired"): its usage stops now (closed in the same transaction) and the
  // engine gives its members back.
  // Idempotent on releasing and released. kNotFound; kConflict never (every
  // other state may be released).
  asio::awaitable<Result<Allocation>> release(std::string id, std::string reason, std::string actor,
                                              std::string request_id);

  // One batch, now, and waits for the reconciles it started: tests drive an
  // engine that was not start()ed with it (as the loop would on a kick: the
  // first is a sweep, later ones follow the events committed since).
  asio::awaitable<void> run_pass();

  // Allocations made ready so far, request to ready, for /metrics.
  TimeToReady time_to_ready() const;

  // Batches the loop (or run_pass) has begun since construction: each
  // begins with one store hop, which reads the events since the last batch
  // and the allocations they name (or, for a sweep, every one in flight).
  uint64_t passes() const;
  // Reconciles begun since construction (one per allocation per batch that
  // found it changed, at most).
  uint64_t reconciles() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln
