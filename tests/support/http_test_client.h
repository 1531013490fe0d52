#pragma once
// HttpTestClient: a tiny blocking HTTP/1.1 (and HTTPS) client for tests.
//
//   kiln::testing::HttpTestClient c("127.0.0.1", server.port());
//   auto r = c.request("GET", "/v1/nodes", "", {{"Authorization", "Bearer x"}});
//   CHECK(r.status == 200);
//
// One client holds one connection and keeps it alive across request() calls,
// so tests can observe keep-alive; it reconnects only when the connection is
// gone (the server said `Connection: close`, or reconnect()/close() was
// called). connect_count() tells how many connections it has opened.
//
// Every call has a deadline (the constructor's `timeout`); transport failures
// and deadlines throw std::runtime_error so a broken server fails the test
// instead of hanging it. TLS does not verify the server certificate.
//
// Not thread-safe: one client per thread (make one per thread for concurrency
// tests; they are cheap).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::testing {

struct TestResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  std::string body;
  bool keep_alive = false;

  // The value of header `name` (any case), "" when absent.
  std::string header(std::string_view name) const;
};

// What read_sse() saw of an event stream.
struct SseResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lowercased
  // Each event's text without its terminating blank line ("data: x").
  std::vector<std::string> events;
  // True when the server finished the body (last chunk) or closed.
  bool ended = false;
};

using Headers = std::map<std::string, std::string>;

class HttpTestClient {
 public:
  HttpTestClient(std::string host, uint16_t port, bool tls = false,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~HttpTestClient();
  HttpTestClient(const HttpTestClient&) = delete;
  HttpTestClient& operator=(const HttpTestClient&) = delete;

  // Sends one request and reads its response on the kept-alive connection
  // (connecting first when there is none). A non-empty body gets a
  // Content-Length and, unless `headers` has one, Content-Type
  // application/json. Throws std::runtime_error on transport failure.
  TestResponse request(std::string_view method, std::string_view target,
                       std::string body = {}, const Headers& headers = {});

  // Closes the connection and opens a new one.
  void reconnect();
  // Connections from now on come from this local address (e.g. 127.0.0.2).
  void set_source(std::string address);
  // Closes the connection (the next request() reconnects).
  void close();
  bool connected() const;
  // How many connections this client has opened so far.
  int connect_count() const;

  // Writes raw bytes (connecting first when needed). For malformed requests.
  void send_raw(std::string_view bytes);
  // Reads one response (after send_raw). Throws on transport failure.
  TestResponse read_response();
  // Waits until the server closes the connection, discarding what arrives.
  // True when it closed within `timeout`.
  bool wait_closed(std::chrono::milliseconds timeout);

  // Sends GET `target` (Accept: text/event-stream) and reads the chunked body
  // until `max_events` events ("\n\n"-terminated) arrived, the body ended, or
  // `timeout` passed. The connection stays open unless the body ended or the
  // timeout fired, so a test can then close() to play a client going away.
  SseResult read_sse(std::string_view target, std::size_t max_events,
                     std::chrono::milliseconds timeout, const Headers& headers = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::testing
