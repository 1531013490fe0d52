#pragma once
// Internal to HttpServer: one connection, served by one coroutine (run()).
// It reads top to bottom like HTTP/1.1 keep-alive:
//
//   handshake (TLS) -> { wait for the first byte (idle deadline) ->
//   read the header (read deadline) -> check the framing and the declared
//   body size -> read the body -> handler -> write (write deadline) } ->
//   lingering close
//
// A request ServerOptions::streamed_body claims skips "read the body": its
// declared size is checked against the claim's limit, and the handler reads
// the body itself through a StreamedBody (streamed_body.h). Deadlines are
// Beast's tcp_stream expiries: a fired expiry closes the socket, so a
// slow-loris peer costs at most read_timeout per request.
//
// Ownership: the session owns its stream and read buffer and holds the
// ServerCore (shared) for options, handler and log; ServerCore::spawn keeps
// the session alive while run() runs and registers it (weakly) for stop().
// Threading: all its I/O runs on the strand its socket was accepted on;
// close() may be called from any thread and posts to that strand.
// Errors: none escape run(): a failed read or write ends the connection; the
// server's own error replies (400, 413, 431, 500, 503) go through
// ServerCore::error_response; a handler that throws is answered 500 and logged.
//
// run() and what it calls are defined in session.cc, for PlainStream and
// TlsStream only.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/post.hpp>

#include "common/http/server_core.h"
#include "common/http/streamed_body.h"

namespace kiln::http::detail {

template <class Stream>
class Session final : public Connection {
 public:
  // `reject`: over max_connections; the first request is answered 503 and the
  // connection closed. `args` construct the stream (a socket, plus the TLS
  // context for TlsStream).
  template <class... Args>
  Session(std::shared_ptr<ServerCore> server, std::string remote, bool reject, Args&&... args)
      : server_(std::move(server)),
        stream_(std::forward<Args>(args)...),
        remote_(std::move(remote)),
        reject_(reject) {}

  asio::any_io_executor executor() { return stream_.get_executor(); }

  void close() override {
    asio::post(stream_.get_executor(), [self = shared_from_this(), this] {
      beast::get_lowest_layer(stream_).close();
    });
  }

  // Serves requests until the peer, a deadline or stop() ends the connection,
  // then closes it politely.
  asio::awaitable<void> run();

 private:
  // What one request/response exchange logs.
  struct Exchange {
    std::string method = "-";
    std::string path = "-";
    std::string request_id;
    SteadyClock::time_point start = SteadyClock::now();
    unsigned status = 0;
  };

  // Fills method, path and request id from what was parsed (maybe partial).
  static void describe(Exchange& ex, const RequestHeader& head);
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
  asio::awaitable<bool> handshake();
  asio::awaitable<bool> wait_for_request(bool first);
  asio::awaitable<bool> serve_one();
  asio::awaitable<bool> serve_streamed(Exchange& ex, bhttp::request_parser<bhttp::empty_body>& header,
                                       uint64_t limit);
  asio::awaitable<bool> respond(Exchange& ex, Request& req, RequestInfo& info,
                                const StreamedBody<Stream>* streamed);
  asio::awaitable<bool> send_reply(Exchange& ex, Reply& reply, unsigned version, bool keep_alive,
                                   bool head_only);
  asio::awaitable<bool> send_file(Exchange& ex, Reply& reply, bool keep_alive, bool head_only);
  asio::awaitable<void> send_error(Exchange& ex, int status, std::string_view detail);
  asio::awaitable<void> shutdown();
  void log_exchange(const Exchange& ex, std::string_view outcome) const;

  std::shared_ptr<ServerCore> server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::string remote_;
  bool reject_;
};

}  // namespace kiln::http::detail
