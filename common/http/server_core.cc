// HttpServer implementation: the listening half.
//
// Shape (after Beast's awaitable example and rippled's server): one accept
// coroutine on its own strand, and one Session coroutine per connection
// (session.h) on a strand of its own, so the io_context may be run on any
// number of threads.
//
// Every live session is registered in ServerCore::sessions_ (weak pointers).
// stop() marks the server stopping, closes the acceptor and posts a close of
// each registered socket to its session's strand; pending reads and writes then
// fail, each coroutine unwinds, and once nothing else is queued io.run()
// returns. A session that finishes unregisters itself from its completion
// handler, so the registry never holds the dead.

#include "common/http/server_core.h"

#include <cassert>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/http/session.h"
#include "common/http/tls_context.h"

namespace kiln::http::detail {

namespace {

std::string endpoint_string(const tcp::endpoint& ep) {
  const auto a = ep.address();
  std::string host = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
  return host + ":" + std::to_string(ep.port());
}

template <class S>
asio::awaitable<void> run_session(std::shared_ptr<S> session) {
  co_await session->run();
}

}  // namespace

ServerCore::ServerCore(asio::io_context& io, ServerOptions options, Handler handler,
                       ErrorResponder error_responder, Logger log)
    : io_(io),
      options_(std::move(options)),
      handler_(std::move(handler)),
      error_responder_(std::move(error_responder)),
      log_(std::move(log)),
      acceptor_strand_(asio::make_strand(io)),
      acceptor_(acceptor_strand_) {}

Response ServerCore::error_response(int status, std::string_view detail) const {
  if (error_responder_) {
    try {
      return error_responder_(status, detail);
    } catch (const std::exception& e) {
      log_.error("http error responder threw", {{"error", e.what()}});
    }
  }
  Response res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  res.body() = std::string(detail) + "\n";
  return res;
}

Status ServerCore::start() {
  assert(!started_);
  started_ = true;
  if (options_.tls_cert_file.empty() != options_.tls_key_file.empty()) {
    return Error(Code::kInvalidArgument, "tls needs both a certificate and a key file");
  }
  if (!options_.tls_cert_file.empty()) {
    auto ctx = make_server_tls_context(options_.tls_cert_file, options_.tls_key_file);
    if (!ctx) return ctx.error();
    tls_ctx_ = std::move(*ctx);
  }

  beast::error_code ec;
  tcp::endpoint endpoint;
  auto address = asio::ip::make_address(options_.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, options_.port);
  } else {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(options_.host, std::to_string(options_.port),
                                    tcp::resolver::numeric_service | tcp::resolver::passive, ec);
    if (ec || results.empty()) {
      return Error(Code::kInvalidArgument, "http listen host " + options_.host + ": " +
                                               (ec ? ec.message() : "no address"));
    }
    endpoint = results.begin()->endpoint();
  }

  const std::string where = endpoint_string(endpoint);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    acceptor_.close(ignored);
    const Code code = ec == asio::error::address_in_use || ec == asio::error::access_denied
                          ? Code::kUnavailable
                          : Code::kInvalidArgument;
    return Error(code, "http listen " + where + ": " + ec.message());
  }
  port_ = acceptor_.local_endpoint(ec).port();
  log_.info("http server listening",
            {{"address", options_.host}, {"port", std::to_string(port_.load())},
             {"tls", tls_ctx_ ? "true" : "false"}});

  auto self = shared_from_this();
  asio::co_spawn(acceptor_strand_, accept_loop(), [self](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      self->log_.error("http accept loop failed", {{"error", ex.what()}});
    }
  });
  return ok_status();
}

asio::awaitable<void> ServerCore::accept_loop() {
  auto self = shared_from_this();  // the loop outlives the HttpServer if need be
  while (!stopping_) {
    beast::error_code ec;
    asio::any_io_executor session_strand = asio::make_strand(io_);
    tcp::socket socket = co_await acceptor_.async_accept(session_strand, redirect(ec));
    if (stopping_ || ec == asio::error::operation_aborted || !acceptor_.is_open()) break;
    if (ec) {
      // Usually EMFILE: back off briefly instead of spinning.
      log_.warn("http accept failed", {{"error", ec.message()}});
      asio::steady_timer pause(acceptor_strand_, std::chrono::milliseconds(50));
      co_await pause.async_wait(redirect(ec));
      continue;
    }
    launch(std::move(socket));
  }
}

void ServerCore::launch(tcp::socket socket) {
  beast::error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  socket.set_option(tcp::no_delay(true), ec);
  // Only this strand adds to live_, so the check cannot race another accept.
  const bool reject = live_.load() >= options_.max_connections;
  auto self = shared_from_this();
  if (tls_ctx_) {
    spawn(std::make_shared<Session<TlsStream>>(self, endpoint_string(peer), reject,
                                               std::move(socket), *tls_ctx_),
          !reject);
  } else {
    spawn(std::make_shared<Session<PlainStream>>(self, endpoint_string(peer), reject,
                                                 std::move(socket)),
          !reject);
  }
}

template <class S>
void ServerCore::spawn(std::shared_ptr<S> session, bool counted) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;  // dropping the session closes its socket
    id = next_id_++;
    sessions_.emplace(id, session);
  }
  if (counted) ++live_;
  auto ex = session->executor();
  asio::co_spawn(ex, run_session(std::move(session)),
                 [self = shared_from_this(), id, counted](std::exception_ptr e) {
                   self->finish(id, counted, e);
                 });
}

void ServerCore::finish(uint64_t id, bool counted, std::exception_ptr e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    sessions_.erase(id);
  }
  if (counted) --live_;
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log_.error("http session failed", {{"error", ex.what()}});
  } catch (...) {
    log_.error("http session failed", {{"error", "non-standard exception"}});
  }
}

void ServerCore::stop() {
  if (stopping_.exchange(true)) return;
  auto self = shared_from_this();
  asio::post(acceptor_strand_, [self] {
    beast::error_code ec;
    self->acceptor_.close(ec);
  });
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, weak] : sessions_) {
      if (auto c = weak.lock()) live.push_back(std::move(c));
    }
  }
  for (auto& c : live) c->close();
  log_.info("http server stopping", {{"connections", std::to_string(live.size())}});
}

}  // namespace kiln::http::detail

namespace kiln::http {

struct HttpServer::Impl : detail::ServerCore {
  using detail::ServerCore::ServerCore;
};

HttpServer::HttpServer(asio::io_context& io, ServerOptions options, Handler handler,
                       ErrorResponder error_responder, Logger log)
    : impl_(std::make_shared<Impl>(io, std::move(options), std::move(handler),
                                   std::move(error_responder), std::move(log))) {}

HttpServer::~HttpServer() { impl_->stop(); }

Status HttpServer::start() { return impl_->start(); }
uint16_t HttpServer::port() const { return impl_->port(); }
bool HttpServer::tls() const { return impl_->tls(); }
std::size_t HttpServer::connection_count() const { return impl_->connection_count(); }
void HttpServer::stop() { impl_->stop(); }

}  // namespace kiln::http
