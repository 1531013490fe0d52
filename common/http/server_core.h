#pragma once
// Internal to HttpServer: the listening half (ServerCore) and what a live
// connection must offer it (Connection).
//
// Ownership: HttpServer holds the ServerCore through a shared_ptr; the accept
// loop and every Session hold one too, so the core outlives its last
// connection even when the HttpServer is gone. The core keeps only weak
// pointers to sessions (sessions_), so the registry never holds the dead.
//
// Threading: the accept loop runs on acceptor_strand_; each session on a
// strand of its own. The accessors used by sessions (options, handler, log,
// stopping, error_response) are safe from any thread; stop() may be called
// from any thread.
//
// Errors: start() returns them as values (see HttpServer::start); a session
// or the accept loop that throws is logged by the core, never rethrown.

#include <atomic>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>

#include "common/http/server_stream.h"

namespace kiln::http::detail {

// One registered connection: stop() may close it from any thread.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  virtual ~Connection() = default;
  // Posts a close of the socket to the connection's strand; pending reads and
  // writes then fail and the session unwinds.
  virtual void close() = 0;
};

class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(asio::io_context& io, ServerOptions options, Handler handler,
             ErrorResponder error_responder, Logger log);

  Status start();
  void stop();

  uint16_t port() const { return port_.load(); }
  bool tls() const { return tls_ctx_ != nullptr; }
  std::size_t connection_count() const { return live_.load(); }

  // For sessions.
  const ServerOptions& options() const { return options_; }
  const Handler& handler() const { return handler_; }
  const Logger& log() const { return log_; }
  bool stopping() const { return stopping_.load(); }
  // The ErrorResponder's reply, or a plain-text one when it is unset or throws.
  Response error_response(int status, std::string_view detail) const;

 private:
  asio::awaitable<void> accept_loop();
  void launch(tcp::socket socket);
  template <class S>
  void spawn(std::shared_ptr<S> session, bool counted);
  void finish(uint64_t id, bool counted, std::exception_ptr e);

  asio::io_context& io_;
  const ServerOptions options_;
  const Handler handler_;
  const ErrorResponder error_responder_;
  const Logger log_;
  asio::strand<asio::io_context::executor_type> acceptor_strand_;
  tcp::acceptor acceptor_;  // used only on acceptor_strand_
  std::shared_ptr<ssl::context> tls_ctx_;
  std::atomic<uint16_t> port_{0};
  std::atomic<std::size_t> live_{0};
  std::atomic<bool> stopping_{false};
  bool started_ = false;

  std::mutex mu_;  // guards sessions_ and next_id_
  std::map<uint64_t, std::weak_ptr<Connection>> sessions_;
  uint64_t next_id_ = 0;
};

}  // namespace kiln::http::detail
