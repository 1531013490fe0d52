#include "cli/sse.h"

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <charconv>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kiln::cli {

void SseParser::feed(std::string_view bytes, std::vector<SseEvent>& out) {
  for (char c : bytes) {
    if (last_was_cr_ && c == '\n') {  // the LF of a CRLF: the line already ended
      last_was_cr_ = false;
      continue;
    }
    last_was_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      line(partial_, out);
      partial_.clear();
    } else {
      partial_ += c;
      // A line longer than any event kilnd writes is a broken stream; cap it.
      if (partial_.size() > (1u << 20)) partial_.clear();
    }
  }
}

void SseParser::line(std::string_view l, std::vector<SseEvent>& out) {
  if (l.empty()) {  // blank line: dispatch
    if (has_data_) {
      if (current_.type.empty()) current_.type = "message";
      out.push_back(std::move(current_));
    }
    current_ = SseEvent();
    has_data_ = false;
    return;
  }
  if (l[0] == ':') return;  // comment (keepalive)
  std::string_view field = l;
  std::string_view value;
  if (auto colon = l.find(':'); colon != std::string_view::npos) {
    field = l.substr(0, colon);
    value = l.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) current_.data += '\n';
    current_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    current_.type = std::string(value);
  } else if (field == "id") {
    current_.id = std::string(value);
  }
}

EventFollower::EventFollower(http::HttpClient& client, http::ClientRequest request, std::optional<int64_t> since,
                             std::chrono::milliseconds silence)
    : client_(client), request_(std::move(request)), last_id_(since), silence_(silence) {}

boost::asio::awaitable<void> EventFollower::run(std::function<bool(const SseEvent&)> on_event,
                                                std::function<void(const std::string&)> on_drop) {
  auto ex = co_await boost::asio::this_coro::executor;
  std::chrono::milliseconds pause{100};
  bool stop = false;
  while (!stop) {
    http::ClientRequest req = request_;
    req.timeout = silence_;
    req.headers["Accept"] = "text/event-stream";
    if (last_id_) req.headers["Last-Event-ID"] = std::to_string(*last_id_);
    SseParser parser;
    std::vector<SseEvent> batch;
    bool got_any = false;
    auto on_data = [&](std::string_view bytes) {
      got_any = true;
      batch.clear();
      parser.feed(bytes, batch);
      for (const SseEvent& e : batch) {
        int64_t seq = 0;
        auto [end, ec] = std::from_chars(e.id.data(), e.id.data() + e.id.size(), seq);
        if (ec == std::errc() && end == e.id.data() + e.id.size()) last_id_ = seq;
        if (!on_event(e)) {
          stop = true;
          return false;
        }
      }
      return true;
    };
    // Named, not a temporary in the co_await (docs/coroutines.md, rule 2).
    std::function<bool(std::string_view)> handler = on_data;
    Result<http::Response> r = co_await client_.stream(req, handler);
    if (stop) break;
    std::string reason;
    if (!r) reason = r.error().message;
    else if (r->result_int() / 100 != 2) reason = "HTTP " + std::to_string(r->result_int()) + " " + r->body().substr(0, 200);
    else reason = "the server ended the stream";
    if (got_any) pause = std::chrono::milliseconds(100);
    on_drop(reason + "; resuming after event " + (last_id_ ? std::to_string(*last_id_) : std::string("(none yet)")));
    boost::asio::steady_timer timer(ex, pause);
    boost::system::error_code ec;
    co_await timer.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

}  // namespace kiln::cli
