#pragma once
// --wait: follows allocations or a node (its provision state, or its power
// state after a power action) until they reach their goal, fail, or the
// deadline passes, showing progress as it goes.
//
// Progress is pushed, not polled: the event stream (sse.h) wakes the watcher
// whenever an event names one of the things waited on, and the watcher then
// reads their current state (the API's view is the truth; events only say
// when to look). A slow poll (every 2 s, 1 s on a terminal so elapsed times
// tick) covers a stream that is down between reconnections. Every request is
// bounded by what is left of the deadline, so a wait can never outlive it.
//
// Ctrl-C (SIGINT) stops the wait, not the operation: the result says so, and
// the caller prints how to resume waiting.
//
// The wait runs on its own io_context and HttpClient, destroyed when it
// returns, so the stream it leaves open never runs again behind the caller's
// back. Blocking; the calling thread.

#include <chrono>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "common/result.h"

namespace kiln::cli {

struct WaitSpec {
  enum class Kind { kAllocations, kNode, kNodePower } kind = Kind::kAllocations;
  std::vector<std::string> ids;  // allocation ids, or one node id
  // Allocations: "ready" or "released". A node: the stable states that count
  // as success (empty: any stable state that is not a failure). A node's
  // power: one power state, "on" or "off", reached once no power action is
  // pending (target_power_state is null); a node whose action ended with
  // another power state, or with last_error set, failed.
  std::vector<std::string> goal;
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
};

struct WaitResult {
  // ok: reached. kTimeout: the deadline passed. Another error: a failure
  // (an allocation failed, a node ended in a failed state) or the API.
  Status status;
  bool interrupted = false;  // Ctrl-C: status is ok but nothing was reached
  nlohmann::json last;       // the last views read (array)
};

// Progress goes to `progress` (a terminal when `tty`, width columns).
WaitResult wait_for(ApiClient& api, const WaitSpec& spec, std::ostream& progress, bool tty, int width);

}  // namespace kiln::cli
