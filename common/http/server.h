#pragma once
// HttpServer: HTTP/1.1 (and HTTPS) on Boost.Beast with C++20 coroutines.
//
// The application is a Handler: a coroutine from a parsed request to a Reply.
// It never sees a socket. The server owns the transport: accept loop, one
// session coroutine per connection, keep-alive, deadlines on every read and
// write, bounded header and body sizes (413 via the ErrorResponder, before the
// handler runs), and at most `max_connections` live sessions (503 beyond).
// A request whose framing it cannot read without guessing (a Transfer-Encoding
// other than exactly `chunked`, one with Content-Length, one in HTTP/1.0) is
// answered 400 and its connection closed before the body is read
// (request_framing.h).
//
// Streaming (Server-Sent Events): a Reply with `stream` set sends its headers
// with chunked transfer encoding, then calls stream(writer); each
// writer.write() sends one chunk. The stream ends when the function returns or
// write() reports the peer gone (false).
//
// Files: a Reply with `file` set sends a byte range of an open file as the
// body (sendfile(2) on plain TCP); byte_range.h parses Range headers for it.
//
// Streamed request bodies (uploads): for a request that
// ServerOptions::streamed_body claims, the server reads only the header and
// hands the handler a BodyReader (RequestInfo::body) instead of a filled
// body(), so a body of many GiB never sits in memory. Every other request is
// read whole, within body_limit, as before.
//
// Threading: start() binds and listens; the caller runs the io_context on as
// many threads as it likes (sessions are independent coroutines; a Handler
// must be safe to call concurrently). stop() closes the acceptor and every
// live connection (in-flight handlers finish; their writes then fail); it may
// be called from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <string_view>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http.hpp>

#include "common/log.h"
#include "common/result.h"

namespace kiln::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

using Request = bhttp::request<bhttp::string_body>;
using RequestHeader = bhttp::request_header<>;
using Response = bhttp::response<bhttp::string_body>;

class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Sends one chunk (with the write deadline); false when the peer is gone.
  virtual asio::awaitable<bool> write(std::string_view data) = 0;
};

// An open, read-only file that replies send from. The descriptor is closed
// when the last owner (a Reply in flight, a cache) lets go of it.
class OpenFile {
 public:
  // Opens `path` (O_RDONLY | O_CLOEXEC) and records its size. Errors:
  // kNotFound (absent), kPermissionDenied (unreadable), kInvalidArgument (not
  // a regular file), kInternal (anything else), each naming the path.
  static Result<std::shared_ptr<OpenFile>> open(const std::string& path);
  // Takes ownership of `fd` (closed on every path). kInvalidArgument when it
  // is not a regular file.
  static Result<std::shared_ptr<OpenFile>> adopt(int fd);
  ~OpenFile();
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // at open time

 private:
  OpenFile(int fd, uint64_t size) : fd_(fd), size_(size) {}
  int fd_;
  uint64_t size_;
};

// Bytes [offset, offset + length) of `file`, sent as a response body.
struct FileBody {
  std::shared_ptr<OpenFile> file;
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct Reply {
  Response response;
  // When set, `response`'s headers are sent and then this produces the body.
  std::function<asio::awaitable<void>(StreamWriter&)> stream;
  // When set (and `stream` is not), `response`'s headers are sent with
  // Content-Length = file->length (response.body() is ignored), then the
  // bytes: with sendfile(2) on plain TCP (zero-copy; the write deadline
  // applies to each stretch without progress), with buffered reads on TLS.
  // A HEAD request gets the headers only. If the file turns out shorter than
  // promised (truncated while serving), the connection is closed.
  std::optional<FileBody> file;
  // When set (and neither `stream` nor `file` is), sent as the body in place
  // of response.body(), which is ignored: one answer kept in memory is sent
  // to many requests without a copy (controller/api/read_cache.h). A HEAD
  // request gets the headers only.
  std::shared_ptr<const std::string> shared_body;
};

// The body of a request the server did not read (ServerOptions::streamed_body),
// read by the handler as it arrives. Valid only while the handler runs; one
// reader at a time.
//
// Deadlines: the peer must send at least kBodyProgressBytes (or the rest of
// the body) within every read_timeout, counted from the first read_some(), or
// the connection is closed (a slow-loris body costs at most that). The limit
// the claim gave is enforced on Content-Length before the handler runs, and
// on chunked bodies as they arrive. "Expect: 100-continue" is answered by the
// first read_some(): a handler that refuses without reading sends its reply
// and the client never sends the body. A body not read to its end closes the
// connection after the reply.
class BodyReader {
 public:
  static constexpr std::size_t kBodyProgressBytes = 64 * 1024;
  virtual ~BodyReader() = default;
  // Reads up to `size` bytes into `data`: how many (at least 1), or 0 once
  // the whole body has been read. Errors: kPayloadTooLarge (over the limit),
  // kInvalidArgument (malformed chunked encoding), kTimeout (too slow),
  // kUnavailable (the peer went away). After an error the connection is done.
  virtual asio::awaitable<Result<std::size_t>> read_some(char* data, std::size_t size) = 0;
  // Content-Length when the request declared one (nullopt: chunked).
  virtual std::optional<uint64_t> content_length() const = 0;
};

struct RequestInfo {
  std::string request_id;  // taken from X-Request-Id when sane, else generated
  std::string remote;      // peer "ip:port"
  bool tls = false;
  BodyReader* body = nullptr;  // set for streamed bodies (ServerOptions::streamed_body)
};

using Handler = std::function<asio::awaitable<Reply>(Request&, const RequestInfo&)>;
// Builds the server's own error replies (413, 400 for unparseable HTTP, 503).
using ErrorResponder = std::function<Response(int status, std::string_view detail)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                      // 0 = pick a free port
  std::size_t header_limit = 16 * 1024;      // bytes; larger headers get 431/413
  std::size_t body_limit = 4 * 1024 * 1024;  // bytes; larger bodies get 413
  std::chrono::seconds read_timeout{30};     // per request, from first byte
  std::chrono::seconds write_timeout{30};    // per response / per stream chunk
  std::chrono::seconds idle_timeout{75};     // keep-alive idle before close
  std::size_t max_connections = 10000;
  // Claims requests whose body the handler reads itself (uploads): given the
  // header, the largest body accepted for this request, or nullopt to have
  // the server read the body into Request::body() within body_limit. Called
  // from any I/O thread. A claimed request reaches the handler with an empty
  // body() and RequestInfo::body set.
  std::function<std::optional<uint64_t>(const RequestHeader&)> streamed_body;
  std::string tls_cert_file;                 // PEM; HTTPS when both are set
  std::string tls_key_file;
};

class HttpServer {
 public:
  HttpServer(asio::io_context& io, ServerOptions options, Handler handler,
             ErrorResponder error_responder, Logger log);
  ~HttpServer();

  // Loads TLS material (when configured), binds and starts accepting.
  // Errors: kInvalidArgument (bad host, unreadable cert/key), kUnavailable (port in use).
  Status start();
  // The bound port (valid after start()).
  uint16_t port() const;
  bool tls() const;
  // Number of live connections (for metrics and tests).
  std::size_t connection_count() const;
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln::http
