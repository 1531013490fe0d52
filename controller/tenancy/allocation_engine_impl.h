#pragma once
// Internal to kiln_tenancy: the allocation engine's state (Impl) and what its
// two files share. allocation_engine.cc runs the loop and the batches and
// moves each allocation through its states (transition, release, the
// ledger); allocation_members.cc drives its member nodes (deploy, replace,
// give back). Thread: the loop, the batches and the bookkeeping they share
// (known, busy, reread, the finishes, cursor, sweep_at) run on the engine's
// strand; reconciles run on the io_context and touch none of it; store calls
// go through the BlockingPool.
//
// A batch's read and a reconcile's end race: finished() runs on the strand
// while a batch waits for its store hop, so what the hop returns may predate
// the writes of a reconcile that has just ended. The allocation is then no
// longer busy and its state differs from the one that reconcile judged, so
// acting on it would judge (and act on) a state that is gone: give a member
// back or replace it a second time. Each batch therefore notes the count of
// finished reconciles before its hop, and an allocation whose reconcile
// finished after that is read again by the next batch instead of being
// judged from this one (`finishes`, `last_finish`, `reading`).

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "common/wait_group.h"
#include "controller/model/allocation_states.h"
#include "controller/store/store.h"
#include "controller/tenancy/allocation_engine.h"

namespace kiln {
namespace allocation_engine_detail {

constexpr const char kEngineActor[] = "allocation-engine";

inline Actor engine_actor(const std::string& request_id) {
  return Actor{"", kEngineActor, "admin", request_id};
}

// An allocation.* event of `a`, its detail naming the allocation.
EventDraft allocation_event(const Allocation& a, const std::string& type);

// What a member's node needs, judged from the node alone.
enum class MemberNeed {
  kDeploy,    // claimed and still in the pool: deploy it
  kWait,      // its operation is running
  kServing,   // active
  kReplace,   // failed, out of the pool, or in maintenance before deploy
};

MemberNeed member_need(const Node& n);

// The member nodes of one allocation, as the batch that judged it read them
// (with the allocation, in one store call: AllocationStore::
// in_flight_with_nodes). A node missing here was deleted. Acting on a view a
// few milliseconds old is safe: every write the engine makes is conditional
// (the conductor's reservation, a transition's state check).
struct MemberNodes {
  std::map<std::string, Node> nodes;

  // kNotFound when the node is gone.
  Result<Node> get(const std::string& id) const {
    auto it = nodes.find(id);
    if (it == nodes.end()) return Error(Code::kNotFound, "node " + id + " not found");
    return it->second;
  }
};

// How a reconcile ended. `done`: nothing it tried failed, so until the
// allocation's state changes there is nothing more to do for it; otherwise
// (a store error, a verb refused) the next sweep tries again.
struct Outcome {
  bool done = true;
  bool ledger_closed = false;  // give_back closed the allocation's usage rows
  // It is out of flight now (released, or failed with every member gone):
  // the engine forgets it, as a batch that no longer finds it would.
  bool left_flight = false;
};

// When the allocation entered its current state (history's last entry).
int64_t entered_at(const Allocation& a);

// How giving one member back went: `ok` false when a step failed (tried
// again), with the allocation's last_error in `problem` when it says why;
// `left` when the member has now left. `leave`: the departure judged, which
// give_back writes with the other members' in one store call
// (write_departures), setting `ok` and `left` from what it wrote.
struct MemberGiven {
  bool ok = true;
  bool left = false;
  std::string problem;
  std::optional<MemberLeave> leave;
};

}  // namespace allocation_engine_detail

struct AllocationEngine::Impl : std::enable_shared_from_this<AllocationEngine::Impl> {
  using MemberNodes = allocation_engine_detail::MemberNodes;
  using Outcome = allocation_engine_detail::Outcome;

  Impl(asio::io_context& io_, AllocationEngineStores stores_, BlockingPool& db_, Conductor& conductor_,
       const Clock& clock_, AllocationEngineOptions opt_, Logger log_)
      : io(io_), store(stores_.allocations), events(stores_.events), catalogue(stores_.catalogue), db(db_),
        conductor(conductor_), clock(clock_), opt(opt_), log(std::move(log_)), strand(asio::make_strand(io_)),
        wake(strand) {
    ready_hist.buckets.assign(std::size(kTimeToReadyBucketsMs), 0);
  }

  asio::io_context& io;
  AllocationStore& store;
  EventLog& events;
  CatalogueStore& catalogue;
  BlockingPool& db;
  Conductor& conductor;
  const Clock& clock;
  AllocationEngineOptions opt;
  Logger log;
  // The loop and the bookkeeping below run here; `wake` (the loop's sleep)
  // is touched only here, so the cancel a kick posts cannot slip between the
  // loop's look at `kicked` and the start of its wait.
  asio::strand<asio::io_context::executor_type> strand;
  asio::steady_timer wake;
  std::atomic<bool> stopped{false};
  // Set by kick() before it posts the cancel (and by a reconcile's end when
  // allocations wait to be read again); cleared as a batch begins.
  std::atomic<bool> kicked{false};
  std::atomic<uint64_t> passes{0};
  std::atomic<uint64_t> reconciles{0};
  mutable std::mutex hist_mu;
  TimeToReady ready_hist;

  // What the engine knows of an in-flight allocation, as its last read
  // found it. Strand only.
  struct Known {
    // The fingerprint (allocation_engine.cc) of the state its last reconcile
    // read, when that reconcile left nothing undone: the same state again
    // needs nothing.
    std::optional<uint64_t> done;
    int64_t expires_at = 0;  // its lease end while it may still be released; 0: none
    bool mine = true;        // this conductor drives it
    bool settled = false;    // ready, every member serving
    bool ledger_closed = false;
  };
  std::map<std::string, Known> known;
  std::set<std::string> busy;    // being reconciled now
  std::set<std::string> reread;  // to read (and judge) in the next batch
  // Reconciles finished since construction; the count when each allocation's
  // last one finished, kept while a batch that began reading before then is
  // still reading; the count at the start of each batch's read in progress.
  uint64_t finishes = 0;
  std::map<std::string, uint64_t> last_finish;
  std::multiset<uint64_t> reading;
  // The last event seq read; nullopt: the next batch is a sweep.
  std::optional<int64_t> cursor;
  // The conductor ring changed (Membership::on_change): the next batch is a
  // sweep, which finds the allocations this conductor owns now.
  bool sweep_asked = false;
  // When the next sweep is due while something moves.
  std::optional<std::chrono::steady_clock::time_point> sweep_at;
  // Every reconcile running (run_pass waits for them).
  WaitGroup running;

  void kick();
  void interrupt();
  asio::awaitable<void> loop();
  // One batch (see allocation_engine.h): reads, judges, starts reconciles.
  asio::awaitable<void> batch();
  // When the loop must wake without a kick (nullopt: only a kick).
  std::optional<std::chrono::steady_clock::time_point> next_due() const;
  bool moving() const;
  // Whether the last reconcile of `id` finished after `read_from` (the
  // finishes count as a batch's read began).
  bool finished_since(const std::string& id, uint64_t read_from) const;
  // Drops the last_finish entries no batch in progress can need.
  void forget_finishes();
  // The conductor ring changed: a sweep soon. Any thread.
  void ownership_moved();
  void start_reconcile(Allocation a, MemberNodes members, uint64_t fingerprint, bool ledger_closed);
  // A reconcile ended: `judged_at` is the clock when it began judging.
  void finished(const std::string& id, uint64_t fingerprint, int64_t judged_at, Outcome o);
  // Notes (on the strand) that a transaction of this engine closed the
  // allocation's usage rows: give_back need not.
  void usage_closed(const std::string& id);

  asio::awaitable<Outcome> reconcile(Allocation a, MemberNodes members, bool ledger_closed);
  asio::awaitable<bool> drive_members(Allocation a, const MemberNodes& members);
  asio::awaitable<Outcome> give_back(Allocation a, const MemberNodes& members, bool ledger_closed);
  asio::awaitable<allocation_engine_detail::MemberGiven> give_back_member(const Allocation& a,
                                                                          const AllocationMember& m,
                                                                          const MemberNodes& members);
  // Runs `jobs` at once on the io_context and returns when all have ended
  // (a job that throws is logged). The jobs may refer to the caller's frame.
  asio::awaitable<void> together(std::vector<std::function<asio::awaitable<void>()>> jobs);
  // Replaces member `n`; false when it was not (the allocation failed, the
  // store failed, or the member moved since `a` was read). `a`'s version
  // follows the write.
  asio::awaitable<bool> replace(Allocation& a, Node n, std::string reason);
  // Moves `a` by `event` from the state and version it was read in
  // (kConflict when its state has moved since, kPreconditionFailed when it
  // was written since), with the usage writes the move makes: ready opens
  // the members' rows, fail and released close them.
  asio::awaitable<Result<Allocation>> transition(Allocation a, AllocationEvent event, std::string reason);
  asio::awaitable<Result<Allocation>> release(std::string id, std::string reason, std::string actor,
                                              std::string request_id);
  // Releases `cur` from the state it was read in. With `version` (the
  // reaper's read) only while the allocation still has it: a lease renewed
  // since is kPreconditionFailed, not reaped. Without (DELETE), a move since
  // the read is followed and released if it still can be.
  asio::awaitable<Result<Allocation>> release_from(Allocation cur, std::string reason, std::string actor,
                                                   std::string request_id,
                                                   std::optional<int64_t> version = std::nullopt);
  // Sets `a`'s last_error (no event); `a`'s version follows the write.
  asio::awaitable<bool> note_error(Allocation& a, std::string error);
  // False when the write did not land (and will not by retrying).
  asio::awaitable<bool> ledger(const char* what, const std::string& allocation, std::function<Status()> write);
  // Writes the departures in `given` (MemberGiven::leave) of allocation
  // `aid` in one transaction, and sets each one's ok and left from it.
  asio::awaitable<void> write_departures(std::string aid, std::vector<allocation_engine_detail::MemberGiven>& given);
  void record_ready(const Allocation& a);
};

}  // namespace kiln
