#pragma once
// PowerSync: the periodic sweep that keeps recorded power states true.
//
// Every `interval`, it reads the power state of every node this instance
// owns (PowerSyncOptions::owns) whose BMC has been verified (not in enroll)
// and that no operation holds, with at most
// `concurrency` BMC calls in flight. All I/O is asynchronous, so one kilnd
// sweeps thousands of BMCs without a thread each.
//
//  - Drift (the BMC says on, Kiln says off) updates the node and records a
//    power.drift event. Kiln does not force the state back: someone pressed a
//    button or the tenant shut down, and operators should see it.
//  - A BMC that fails `max_failures` sweeps in a row gets fault=power_failure
//    and maintenance with reason "power sync: <error>"; both are cleared
//    automatically when it answers again. Maintenance set by an operator is
//    never cleared here (the fault alone is).
//
// What a sweep reads. Each sweep lists the nodes on this instance's arcs of
// the conductor ring (PowerSyncOptions::ranges: each node's ring position is
// stored with it), a page of 1,000 at a time, as NodeRepo::power_sync_nodes
// reads them: the id, the ownership key, the states that decide whether the
// BMC is asked, the BMC and the version that guards the write, and nothing
// else (no Node, no inventory or other JSON document, no ports). So each of
// N instances reads about 1/N of the rows, through the (ring_pos, id)
// index, and a minute's sweep of a fleet whose nodes mostly sit in enroll
// costs a narrow index walk. The ring in memory (membership.h) still
// decides: a node read under a view that has changed since, or not placed
// on the ring yet, is dropped unless `owns` says it is this instance's. A
// write (drift, fault, recovery) reads and rewrites the whole node in its
// own transaction, conditional on the version the sweep read.
//
// Failure counts live in memory: a restart gives every BMC a fresh start,
// which errs on the side of not faulting a node.
//
// Threading: workers run on the I/O threads (shared counters are atomics or
// mutex-guarded; no strand, see docs/coroutines.md); store calls go through
// the BlockingPool. Sweeps do not overlap: the loop runs one at a time.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "common/blocking_pool.h"
#include "common/crypto.h"
#include "common/log.h"
#include "controller/store/node_repo.h"
#include "drivers/driver.h"

namespace kiln {

struct PowerSyncOptions {
  // Design default: once a minute is frequent enough to notice a node that
  // lost power before a tenant does, and cheap with async I/O.
  std::chrono::milliseconds interval{std::chrono::seconds(60)};
  // BMC calls in flight at once. BMCs are slow (seconds per GET) but cheap to
  // wait on; 256 sweeps 1,000 BMCs in a few round trips.
  std::size_t concurrency = 256;
  // Consecutive failed sweeps before a node is faulted. One lost reply must
  // not put a node into maintenance.
  int max_failures = 3;
  // Which nodes this instance syncs, by ownership key (membership.h: the
  // node's allocation, else its id): the ones it owns on the conductor ring
  // (Conductor sets it from its Membership). Empty: every node. Called on
  // I/O threads; must be thread-safe.
  std::function<bool(std::string_view ownership_key)> owns;
  // The stored ring positions this instance owns now (HashRing::ranges_of):
  // a sweep reads only the nodes there (and those not placed yet), so each
  // of N instances reads about 1/N of the nodes; `owns` still decides.
  // Empty: every position. Called once per sweep, on an I/O thread.
  std::function<std::vector<RingRange>()> ranges;
};

struct SweepStats {
  std::size_t nodes = 0;       // nodes whose BMC was asked
  std::size_t ok = 0;
  std::size_t failed = 0;
  std::size_t drifted = 0;     // recorded state corrected
  std::size_t faulted = 0;     // newly put into power_failure
  std::size_t recovered = 0;   // power_failure cleared
  std::size_t skipped = 0;     // held by an operation, in enroll, or no driver
  double seconds = 0;
};

class PowerSync {
 public:
  PowerSync(asio::io_context& io, NodeRepo& store, BlockingPool& db, const DriverRegistry& drivers,
            const SecretBox& secrets, PowerSyncOptions options, Logger log);
  ~PowerSync();

  // Runs sweeps every interval until stop(). interval 0 disables the loop.
  void start();
  void stop();

  // One full sweep now (also used by tests and benchmarks).
  asio::awaitable<SweepStats> sweep_once();

  SweepStats last_sweep() const;
  uint64_t sweeps_done() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln
