// kilnd's replies as the agent reads them (agent/runtime/replies.h): bytes
// from whoever answers on the provisioning network. Beyond not crashing: a
// lookup reply has a session, a command has an id and object args, and the
// interval kilnd asks for always lands within the agent's bounds.
#include <chrono>
#include <cstdint>
#include <string_view>

#include "agent/runtime/replies.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using std::chrono::milliseconds;
  std::string_view body(reinterpret_cast<const char*>(data), size);
  const milliseconds lo(200), hi(60000);
  if (auto l = kiln::agent::read_lookup_reply(body)) {
    if (l->heartbeat_interval_s) {
      milliseconds ms = kiln::agent::clamp_interval(*l->heartbeat_interval_s, lo, hi);
      if (ms < lo || ms > hi) __builtin_trap();
    }
  }
  if (auto h = kiln::agent::read_heartbeat_reply(body)) {
    if (h->command && (h->command->id.empty() || !h->command->args.is_object())) __builtin_trap();
    if (h->heartbeat_interval_s) {
      milliseconds ms = kiln::agent::clamp_interval(*h->heartbeat_interval_s, lo, hi);
      if (ms < lo || ms > hi) __builtin_trap();
    }
  }
  (void)kiln::agent::problem_detail(body);
  return 0;
}
