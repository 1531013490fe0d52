#pragma once
// Server-Sent Events: the parser (pure, fed by whatever bytes arrive) and
// EventFollower, which keeps one /v1/events/stream open across drops.
//
// The follower resumes exactly where it left off: every event kilnd sends
// carries `id: <seq>`, and a reconnection sends `Last-Event-ID: <last seq
// seen>`, so kilnd replays what was committed meanwhile (events_routes.cc).
// A drop (connection reset, kilnd restarted, a proxy timing out, or no byte
// for `silence` although kilnd sends keepalives) is reported to `on_drop`
// and followed by a reconnection after a short, growing pause. It never
// gives up by itself: whoever runs it stops the io_context when done.
//
// Threading: run() is a coroutine on the HttpClient's executor; callbacks run
// there and must not block.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "common/http/client.h"

namespace kiln::cli {

struct SseEvent {
  std::string id;
  std::string type;  // "message" when the stream names none
  std::string data;  // data lines joined by "\n"
};

// Incremental parser (the WHATWG event-stream format: fields, comments,
// CRLF/LF/CR line ends, multi-line data). Keeps only the unfinished line and
// event between feeds.
class SseParser {
 public:
  void feed(std::string_view bytes, std::vector<SseEvent>& out);

 private:
  void line(std::string_view l, std::vector<SseEvent>& out);
  std::string partial_;
  SseEvent current_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

class EventFollower {
 public:
  // `request` is a ready GET of /v1/events/stream (URL, token, TLS);
  // `since`: start after this seq (nullopt: from now).
  EventFollower(http::HttpClient& client, http::ClientRequest request, std::optional<int64_t> since,
                std::chrono::milliseconds silence = std::chrono::seconds(45));

  // Follows the stream until `on_event` returns false. `on_drop` gets a
  // one-line reason each time the stream is lost (before the reconnection).
  boost::asio::awaitable<void> run(std::function<bool(const SseEvent&)> on_event,
                                   std::function<void(const std::string&)> on_drop);

  // The id of the last event delivered (what a reconnection resumes after).
  std::optional<int64_t> last_id() const { return last_id_; }

 private:
  http::HttpClient& client_;
  http::ClientRequest request_;
  std::optional<int64_t> last_id_;
  std::chrono::milliseconds silence_;
};

}  // namespace kiln::cli
