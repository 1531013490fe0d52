#pragma once
// HttpClient: an asynchronous HTTP/1.1 + HTTPS client on Beast.
//
// One client keeps a small pool of keep-alive connections per origin
// (scheme://host:port) and reuses them; a connection that the peer closed is
// detected and replaced transparently (one retry for idempotent requests only
// when the failure happened before any response byte arrived). Every request
// has a deadline covering connect, TLS handshake, write and read. Bodies larger
// than `max_body` are refused with kPayloadTooLarge.
//
// TLS: verification is on by default (system trust store, or `ca_file`);
// `verify_tls=false` disables it for one request (lab BMCs with self-signed
// certificates). SNI is always sent. One SSL_CTX per trust setting serves
// every connection of the client.
//
// TLS session resumption: the client keeps the latest TLS session of each
// origin and trust setting (up to max_tls_sessions) and offers it on the next
// new connection there, so a host asked again after its connection was closed
// skips the certificate exchange and signature checks (RFC 8446 2.2; session
// tickets or session IDs under TLS 1.2). A session is used once and replaced by
// the one the resumed connection receives, as RFC 8446 C.4 asks of clients. A
// session made without verification is never offered where verification is
// wanted: sessions are keyed like the pool.
//
// Memory: an idle TLS connection holds about 20 KiB: OpenSSL's SSL object,
// its session and the peer's certificate, and no record buffers (TLS runs on
// TlsClientStream, tls_client_stream.h, not asio::ssl::stream, whose four
// 17 KiB buffers made it about 90 KiB). A client that talks to thousands of
// hosts (a Redfish fleet) bounds them with max_idle_total: beyond it the
// least recently used idle connection is closed.
//
// Redirects are NOT followed here (Redfish needs to see 307/308 and decide);
// the caller gets the 3xx response.
//
// Threading: request() is a coroutine on the client's executor; calls from one
// strand are safe; the pool is guarded by a mutex so several coroutines on
// different threads may share one client. close() cancels idle connections.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "common/http/server.h"
#include "common/http/url.h"
#include "common/result.h"

namespace kiln::http {

struct ClientRequest {
  bhttp::verb method = bhttp::verb::get;
  std::string url;                            // absolute
  std::map<std::string, std::string> headers; // extra headers (Authorization, If-Match, ...)
  std::string body;
  std::string content_type;                   // set when body is non-empty
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  bool verify_tls = true;
  std::string ca_file;                        // PEM bundle; empty = system store
};

struct ClientOptions {
  std::size_t max_idle_per_origin = 4;
  // Idle connections over all origins; the least recently used is closed
  // first. 256 TLS ones hold about 5 MiB. 0 = no bound beyond the per-origin one.
  std::size_t max_idle_total = 256;
  std::size_t max_body = 64 * 1024 * 1024;
  std::chrono::seconds idle_timeout{30};  // idle pooled connections are dropped after this
  // TLS sessions kept for resumption, one per origin and trust setting; the
  // oldest is forgotten first. Each is a few KiB (the ticket and the peer's
  // certificate), so 16,384 cover a large fleet in tens of MiB. 0 = never resume.
  std::size_t max_tls_sessions = 16384;
};

// What a client holds and has done, for tests and benchmarks.
struct ClientStats {
  std::size_t idle_connections = 0;  // pooled, over all origins
  std::size_t tls_sessions = 0;      // kept for resumption
  std::size_t tls_contexts = 0;      // SSL_CTXs: one per trust setting in use
  uint64_t tls_handshakes = 0;       // completed, full or resumed
  uint64_t tls_resumed = 0;          // of those, resumed (SSL_session_reused)
};

class HttpClient {
 public:
  HttpClient(asio::any_io_executor ex, ClientOptions options = {});
  ~HttpClient();

  // Sends `req` and returns the response. Errors: kInvalidArgument (bad URL),
  // kTimeout (deadline), kUnavailable (connect refused / reset / TLS failure,
  // with the reason), kPayloadTooLarge.
  asio::awaitable<Result<Response>> request(ClientRequest req);

  // Streams one response body (Server-Sent Events): sends `req` on a fresh
  // connection that is never pooled, and for a 2xx answer hands each piece
  // of the body to `on_data` as it arrives instead of keeping it. Here
  // `req.timeout` bounds the connect and the header, then each *silence*: a
  // stream that sends nothing (not even a keepalive comment) for that long
  // is kTimeout. Returns the response (status and headers; for a non-2xx
  // answer also its body, bounded by max_body) when the body ends, or as
  // soon as `on_data` returns false. Errors as request(). `on_data` runs on
  // the client's executor and must not block.
  asio::awaitable<Result<Response>> stream(ClientRequest req,
                                           std::function<bool(std::string_view)> on_data);

  // Drops all pooled connections (the TLS sessions are kept).
  void close();

  ClientStats stats() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::http
