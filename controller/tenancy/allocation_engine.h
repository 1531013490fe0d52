#pragma once
// AllocationEngine: moves allocations through their states
// (controller/model/allocation_states.h) by driving their members' nodes with
// the conductor's ordinary verbs, and releases allocations whose lease ran out.
//
// Design. The engine is level-triggered, like a Kubernetes controller: each
// pass reads every allocation still in flight from the store and does the
// next thing each one needs, judged only from what the store says now (the
// allocation, its member rows, the member nodes). Nothing it needs lives only
// in memory, so a kilnd killed at any point resumes where it was: the
// conductor resumes the nodes' own operations, and the next pass picks the
// allocations up. Every write is conditional (update_allocation_if checks the
// state inside the mutation, node verbs take the node's reservation), so a
// pass racing an API call cannot undo it.
//
// What a pass does, per state:
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
//                  every member is active, provisioning -> ready and the
//                  members' usage rows open; a ready allocation that loses a
//                  member degrades to provisioning while it is replaced.
//   failed / releasing
//                  members are given back: a node still deploying is aborted,
//                  then every deployed node is undeployed (cleaning); a member
//                  leaves once its node is out of cleaning (available, or a
//                  failed state an operator must look at) or never got the
//                  image. releasing -> released when every member has left.
//                  A verb that fails here sets last_error and is retried on
//                  the next pass: never lost, never back in the pool uncleaned.
//   any state with expires_at in the past -> releasing ("lease expired").
//
// Several conductors: a pass drives only the allocations whose id this
// instance owns on the conductor ring (the conductor's Membership), so one
// conductor reaps each lease and replaces each member; a kick on another
// instance is picked up by the owner's next pass.
//
// When a pass runs. Work is started by the event or the deadline that needs
// it, never by a loop looking for it:
//   - kick(): every event the store commits (a member node moved, an
//     allocation was made, released or renewed) kicks the engine; the kick
//     cancels the timer the loop sleeps on, so the pass starts at once. A kick
//     during a pass runs one more pass after it (kicks coalesce).
//   - the earliest lease end among the allocations in flight;
//   - `interval` after a pass, but only while an allocation is still moving
//     (pending, provisioning, failed with members, releasing, a ready one
//     short of serving members) or belongs to another conductor: the retry
//     of what a store error or a busy node left undone, and the takeover of
//     a dead owner's allocations.
// With no allocation in flight, or only ready ones whose members all serve,
// the engine sleeps until a kick or a lease end: an idle kilnd makes no pass.
// A change written to the store without an event (none in kilnd) is seen at
// the next kick.
//
// Threading: the loop runs on a strand of the io_context (its timer and the
// kick's cancel are serialised there); reconciles and every public coroutine
// run on the io_context; store calls go through the BlockingPool. kick(),
// stop() and the counters are thread-safe.

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

class NodeStore;  // controller/store/store.h

struct AllocationEngineOptions {
  // While an allocation is moving (see "When a pass runs"), a pass at least
  // this often retries what a store error or a busy node left undone. Leases
  // end on their own deadline, kicks at once: neither waits for it.
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
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
  // The whole store: the engine reads and writes allocations and the usage
  // ledger, reads nodes, and reads profiles to make virtual guests.
  AllocationEngine(asio::io_context& io, NodeStore& store, BlockingPool& db, Conductor& conductor,
                   const Clock& clock, AllocationEngineOptions options, Logger log);
  ~AllocationEngine();

  // Starts the loop (call after the conductor's start()). stop() ends it
  // after the pass in progress; allocations carry on at the next start.
  void start();
  void stop();
  // Asks for a pass now (a new allocation, a release, a member moved): wakes
  // the loop's timer, or queues one more pass after the one running.
  // Thread-safe, cheap (called on every event the store commits).
  void kick();

  // Moves the allocation to releasing (DELETE, or the reaper with "lease
  // expired"): its usage stops now and the next pass gives its members back.
  // Idempotent on releasing and released. kNotFound; kConflict never (every
  // other state may be released).
  asio::awaitable<Result<Allocation>> release(std::string id, std::string reason, std::string actor,
                                              std::string request_id);

  // One pass, now (tests drive the engine with it; the loop calls it too).
  asio::awaitable<void> run_pass();

  // Allocations made ready so far, request to ready, for /metrics.
  TimeToReady time_to_ready() const;

  // Passes the loop (or run_pass) has begun since construction: each begins
  // with one store read of the allocations in flight.
  uint64_t passes() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln
