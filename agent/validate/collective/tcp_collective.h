#pragma once
// The test-only TCP collective (collective "tcp" in docs/agent-protocol.md):
// proves kilnd's rendezvous for nccl_multinode on machines without GPUs. It
// is a star, not a ring: every peer sends its buffer to the root, the root
// sums them with its own and sends the sum back. Its bandwidth figures are
// those of plain sockets through one host; they say nothing about a GPU
// fabric, and the report says so.
//
// Wire protocol (one TCP connection per peer, host byte order for floats,
// which is fine between the x86-64 nodes of one allocation):
//   peer -> root  hello: "KILNTCP1", the 32-hex nonce, then rank, nodes,
//                 max_mib and iterations as big-endian uint32 (56 bytes)
//   root -> peer  frame {type, length} (big-endian uint32s) + text:
//                 accepted | refused(why); later go | abort(why)
//   then per size and round: peer sends its floats, root sends the sum.
// The root checks every hello (nonce, rank in 1..nodes-1, no duplicate, the
// same nodes and sweep) and refuses a bad one with the reason, which that
// peer reports; the root keeps waiting for the right peers, and names the
// refusals if it times out.
//
// Every wait is bounded by the participant's deadline (args.timeout from its
// start) with poll(); sockets are non-blocking, writes use MSG_NOSIGNAL.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "agent/validate/checks/check_result.h"
#include "agent/validate/collective/collective_args.h"
#include "common/result.h"

namespace kiln::agent {

struct TcpUniqueId {
  std::string ip;     // dotted IPv4
  std::uint16_t port = 0;
  std::string nonce;  // 32 lowercase hex digits
};

// Parses "tcp:<ipv4>:<port>:<32 hex>". kInvalidArgument when malformed.
Result<TcpUniqueId> parse_tcp_unique_id(std::string_view text);
// The inverse: "tcp:10.77.0.5:40123:<nonce>".
std::string format_tcp_unique_id(const TcpUniqueId& id);

// Rank 0. Created by collective_prepare; run() then executes on a
// background thread while the agent answers, and collective_run collects
// its result.
class TcpRoot {
 public:
  // Listens on `address`:<ephemeral port> with a fresh random nonce; the
  // deadline (args.timeout) starts now. Uses args.run, nodes, max_mib,
  // iterations and min_busbw_gbps (prepare has none: collective_run applies
  // its floor to the result afterwards).
  // Errors: kInvalidArgument for an address that is not IPv4, kUnavailable
  // when the socket cannot be bound or listened on.
  static Result<std::unique_ptr<TcpRoot>> listen(const std::string& address, const CollectiveArgs& args);
  ~TcpRoot();
  TcpRoot(const TcpRoot&) = delete;
  TcpRoot& operator=(const TcpRoot&) = delete;

  // The id peers join with.
  const std::string& unique_id() const { return unique_id_; }

  // Waits for nodes-1 peers, runs the sweep and returns rank 0's check (a
  // fail with the reason when peers never joined, a peer dropped or the
  // data was wrong). Call once, from one thread; blocks until done, the
  // deadline or cancel().
  CheckResult run();

  // Makes a running (or later) run() return soon with a fail "cancelled".
  // Safe from any thread.
  void cancel();

 private:
  TcpRoot() = default;

  CollectiveArgs args_;
  TcpUniqueId id_;
  std::string unique_id_;
  int listen_fd_ = -1;
  int cancel_pipe_[2] = {-1, -1};
  std::chrono::steady_clock::time_point deadline_;
};

// Ranks 1..nodes-1: joins the root named by args.unique_id and runs the
// sweep; blocks until done or args.timeout after the call. Applies
// args.min_busbw_gbps. Never fails as a call: every problem is a fail check.
CheckResult run_tcp_peer(const CollectiveArgs& args);

}  // namespace kiln::agent
