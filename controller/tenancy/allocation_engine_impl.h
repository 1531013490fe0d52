#pragma once
// Internal to kiln_tenancy: the allocation engine's state (Impl) and what its
// two files share. allocation_engine.cc runs the loop and the passes and moves
// each allocation through its states (transition, release, the ledger);
// allocation_members.cc drives its member nodes (deploy, replace, give back).
// Thread: everything here runs on the engine's strand (allocation_engine.h);
// store calls go through the BlockingPool.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

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

// The member nodes of every allocation in flight, read with the allocations
// in one call on the pool at the start of a pass: one hop instead of one per
// member (with 100 allocations of 5, a pass made 500 pool hops that queued
// behind the API's readers). A node missing here was deleted. Acting on a
// view a few milliseconds old is safe: every write the engine makes is
// conditional (the conductor's reservation, update_allocation_if).
struct MemberNodes {
  std::map<std::string, Node> nodes;

  // kNotFound when the node is gone.
  Result<Node> get(const std::string& id) const {
    auto it = nodes.find(id);
    if (it == nodes.end()) return Error(Code::kNotFound, "node " + id + " not found");
    return it->second;
  }
};

}  // namespace allocation_engine_detail

struct AllocationEngine::Impl : std::enable_shared_from_this<AllocationEngine::Impl> {
  using MemberNodes = allocation_engine_detail::MemberNodes;

  Impl(asio::io_context& io_, NodeStore& store_, BlockingPool& db_, Conductor& conductor_, const Clock& clock_,
       AllocationEngineOptions opt_, Logger log_)
      : io(io_), store(store_), db(db_), conductor(conductor_), clock(clock_), opt(opt_), log(std::move(log_)),
        strand(asio::make_strand(io_)), wake(strand) {
    ready_hist.buckets.assign(std::size(kTimeToReadyBucketsMs), 0);
  }

  asio::io_context& io;
  NodeStore& store;
  BlockingPool& db;
  Conductor& conductor;
  const Clock& clock;
  AllocationEngineOptions opt;
  Logger log;
  // The loop runs here; `wake` (its sleep) is touched only here, so the
  // cancel a kick posts cannot slip between the loop's look at `kicked` and
  // the start of its wait.
  asio::strand<asio::io_context::executor_type> strand;
  asio::steady_timer wake;
  std::atomic<bool> stopped{false};
  // Set by kick() before it posts the cancel; cleared as a pass begins.
  std::atomic<bool> kicked{false};
  std::atomic<uint64_t> passes{0};
  mutable std::mutex hist_mu;
  TimeToReady ready_hist;

  void kick();
  void interrupt();
  asio::awaitable<void> loop();
  // One pass; returns when the next one is due without a kick (nullopt:
  // only a kick).
  asio::awaitable<std::optional<std::chrono::steady_clock::time_point>> pass();
  asio::awaitable<void> reconcile(Allocation a, const MemberNodes& members);
  asio::awaitable<void> drive_members(Allocation a, const MemberNodes& members);
  asio::awaitable<void> give_back(Allocation a, const MemberNodes& members);
  // Replaces member `n`; false when the allocation failed instead.
  asio::awaitable<bool> replace(Allocation a, Node n, std::string reason);
  asio::awaitable<Result<Allocation>> transition(std::string id, AllocationEvent event, std::string reason);
  asio::awaitable<Result<Allocation>> release(std::string id, std::string reason, std::string actor,
                                              std::string request_id);
  asio::awaitable<void> note_error(std::string id, std::string error);
  asio::awaitable<void> ledger(const char* what, const std::string& allocation, std::function<Status()> write);
  asio::awaitable<void> leave(const Allocation& a, const std::string& node_id, MemberStatus status,
                              std::string reason);
  void record_ready(const Allocation& a);
};


}  // namespace kiln
