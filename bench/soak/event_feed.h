#pragma once
// EventFeed: kilnd's event log followed by since=, as any client follows it,
// and the first invariant held to it: events-gap-free. Every poll reads the
// events after the last seq seen (pages of 1000) and checks that each seq is
// the previous one plus one: a gap is an event a follower never sees, a
// repeat or a step back is one it sees twice.
//
// The events are handed on, parsed, to the models that check the other
// invariants (operations, ownership, deadlines).
//
// Not thread-safe: the soak's driving thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/soak/api_client.h"
#include "bench/soak/findings.h"

namespace kiln::soak {

// One event as GET /v1/events shows it.
struct Event {
  int64_t seq = 0;
  int64_t ts_ms = 0;
  std::string type;
  std::string node;  // "" when the event is about no node
  std::string from, to;
  nlohmann::json detail = nlohmann::json::object();
  // detail's string member `key`, or "".
  std::string text(const char* key) const;
};

// Parses one element of GET /v1/events' "events"; nullopt when malformed.
std::optional<Event> parse_event(const nlohmann::json& j);

// What is wrong with `seq` following `last` in a feed read by since=last
// (a gap, a repeat, a step back); nullopt when it is last + 1.
std::optional<std::string> sequence_break(int64_t last, int64_t seq);

class EventFeed {
 public:
  EventFeed(ApiClient& api, Findings& findings, std::string token);

  // The events committed since the last poll, in order; empty when kilnd
  // cannot be reached (the next poll picks up where this one stopped).
  std::vector<Event> poll();
  // Reads the whole log again from seq 0 and checks it holds seq 1..last,
  // each once (the end-of-run check of what poll() checked as it went).
  void reread_all();

  int64_t last_seq() const { return last_seq_; }
  int64_t events_read() const { return read_; }

 private:
  // Pages from `since`; each page's events go to `sink`. False when a page
  // could not be read.
  template <typename Sink>
  bool read_from(int64_t since, Sink&& sink);

  ApiClient& api_;
  Findings& findings_;
  std::string token_;
  int64_t last_seq_ = 0;
  int64_t read_ = 0;
};

}  // namespace kiln::soak
