#pragma once
// A small blocking HTTP/1.1 client over POSIX sockets, sized for the deploy
// ramdisk: plain http://, or https:// pinned to one certificate (OpenSSL's
// libssl; see HttpClientOptions::tls_sha256), one request per connection (Connection: close), bodies
// framed by Content-Length, chunked transfer encoding or end of stream. Every
// connect and every read/write has a deadline, so a dead controller or a
// half-open connection never hangs the agent.
//
// Two entry points: request() buffers the response body (agent API calls with
// small JSON bodies), stream() hands body bytes to a callback as they arrive
// (image downloads). Both block the calling thread; a client holds no state
// between calls and may be used from several threads at once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace kiln::agent {

struct Url {
  std::string host;     // "10.77.0.1" or a name; IPv6 literals without brackets
  uint16_t port = 80;   // 443 by default for https
  bool tls = false;     // https://
  std::string path;     // "/v1/agent/lookup?x=1", always starts with '/'

  // Parses "http[s]://host[:port][/path]". Errors: kInvalidArgument for
  // another scheme or a malformed authority.
  static Result<Url> parse(std::string_view text);
  // "host:port" for the Host header.
  std::string authority() const;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpResponseHead {
  int status = 0;
  HttpHeaders headers;
  // The first header named `name` (case-insensitive); "" when absent.
  std::string header(std::string_view name) const;
};

struct HttpResponse {
  int status = 0;
  HttpHeaders headers;
  std::string body;
  std::string header(std::string_view name) const;
};

struct HttpClientOptions {
  // A controller on the same L2 segment answers a SYN in microseconds; a few
  // seconds is patient enough without stalling the heartbeat loop.
  std::chrono::milliseconds connect_timeout{5000};
  // Per read or write, not per request: a 100 GiB image download may take an
  // hour, but no single wait for bytes should take more than this.
  std::chrono::milliseconds io_timeout{30000};
  // request() refuses bodies larger than this (agent API replies are small).
  std::size_t max_buffered_body = 16 * 1024 * 1024;
  // SHA-256 hex of kilnd's leaf certificate (DER). Set: only https:// URLs,
  // and only to a server presenting exactly that certificate (no CA store in
  // the ramdisk: the pin is the trust; chain and name are not checked).
  // Empty: only http:// URLs. A URL of the other kind is kInvalidArgument; a
  // certificate that does not match is kUnavailable before anything is sent.
  std::string tls_sha256;
};

class HttpClient {
 public:
  explicit HttpClient(HttpClientOptions options = {}) : options_(options) {}

  // Sends one request and returns the whole response. `headers` are added to
  // Host, Connection: close and (with a body) Content-Length. Errors:
  // kInvalidArgument for a bad URL, kUnavailable for a refused/reset/closed
  // connection or malformed reply, kTimeout when a deadline passes. Any HTTP
  // status (including 4xx/5xx) is a successful response, not an error.
  Result<HttpResponse> request(std::string_view method, std::string_view url, const HttpHeaders& headers = {},
                               std::string_view body = {}) const;

  // Streams the response: on_head is called once with the status and headers;
  // returning an error from it stops the transfer with that error. on_body is
  // called with each run of body bytes (never more than 1 MiB at a time, after
  // chunk framing is removed); an error from it stops the transfer. When the
  // connection ends before the body is complete the error is kUnavailable and
  // everything already delivered stays delivered (the caller resumes with a
  // Range request).
  Status stream(std::string_view method, std::string_view url, const HttpHeaders& headers, std::string_view body,
                const std::function<Status(const HttpResponseHead&)>& on_head,
                const std::function<Status(const char* data, std::size_t n)>& on_body) const;

 private:
  HttpClientOptions options_;
};

}  // namespace kiln::agent
