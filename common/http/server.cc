// HttpServer implementation.
//
// Shape (after Beast's awaitable example and rippled's server): one accept
// coroutine on its own strand, and one Session coroutine per connection on a
// strand of its own, so the io_context may be run on any number of threads.
// A session reads top to bottom like HTTP/1.1 keep-alive:
//
//   handshake (TLS) -> { wait for the first byte (idle deadline) ->
//   read the header (read deadline) -> check the declared body size ->
//   read the body -> handler -> write (write deadline) } -> lingering close
//
// A request ServerOptions::streamed_body claims skips "read the body": its
// declared size is checked against the claim's limit, and the handler reads
// the body itself through a StreamedBody (buffer_body parser).
//
// Every live session is registered in ServerCore::sessions_ (weak pointers).
// stop() marks the server stopping, closes the acceptor and posts a close of
// each registered socket to its session's strand; pending reads and writes then
// fail, each coroutine unwinds, and once nothing else is queued io.run()
// returns. A session that finishes unregisters itself from its completion
// handler, so the registry never holds the dead.
//
// Deadlines are Beast's tcp_stream expiries: a fired expiry closes the socket,
// so a slow-loris peer costs at most read_timeout per request.
//
// File replies on plain TCP are sent with sendfile(2) straight from the page
// cache: the socket is non-blocking, so sendfile writes what fits and the
// session waits for writability in between. Those waits are on the raw
// socket, outside tcp_stream's expiry, so a FileWatch timer cancels them when
// no byte has moved for write_timeout. A session yields its thread every few
// MiB so one fast reader cannot starve the others sharing the thread.

#include "common/http/server.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>

#include "common/http/request_framing.h"
#include "common/http/tls_context.h"
#include "common/ids.h"

namespace kiln::http {

namespace {

using tcp = asio::ip::tcp;
namespace ssl = asio::ssl;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using SteadyClock = std::chrono::steady_clock;

template <class S>
constexpr bool kIsTls = std::is_same_v<S, TlsStream>;

// How long a closing connection keeps reading (and discarding) what the peer
// still sends, so that our last response is not destroyed by a TCP reset.
constexpr std::chrono::seconds kLinger{1};
constexpr std::size_t kLingerMaxBytes = 1024 * 1024;
constexpr std::size_t kFirstReadBytes = 4096;
// File replies: buffered (TLS) read size, and bytes sent before yielding the thread.
constexpr std::size_t kFileBufferBytes = 256 * 1024;
constexpr uint64_t kFileYieldBytes = 8 * 1024 * 1024;

auto redirect(beast::error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }

bool is_sane_request_id(std::string_view s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
  });
}

std::string path_of(std::string_view target) {
  return std::string(target.substr(0, target.find('?')));
}

std::string endpoint_string(const tcp::endpoint& ep) {
  const auto a = ep.address();
  std::string host = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
  return host + ":" + std::to_string(ep.port());
}

// Errors that mean "the peer went away or a deadline fired": nothing to answer.
bool is_disconnect(const beast::error_code& ec) {
  return ec == beast::error::timeout || ec == asio::error::eof ||
         ec == asio::error::operation_aborted || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe || ec == asio::error::bad_descriptor ||
         ec == asio::error::not_connected || ec == bhttp::error::end_of_stream ||
         ec == bhttp::error::partial_message || ec == asio::ssl::error::stream_truncated;
}

// Bodies of 1xx/204/304 must be empty and carry no length of their own.
void finalize_payload(Response& res) {
  const unsigned s = res.result_int();
  if ((s >= 100 && s < 200) || s == 204 || s == 304) {
    res.body().clear();
    if (s != 304) res.erase(bhttp::field::content_length);
    return;
  }
  res.prepare_payload();
}

// One registered connection: stop() may close it from any thread.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  virtual ~Connection() = default;
  virtual void close() = 0;
};

class ServerCore : public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(asio::io_context& io, ServerOptions options, Handler handler,
             ErrorResponder error_responder, Logger log)
      : io_(io),
        options_(std::move(options)),
        handler_(std::move(handler)),
        error_responder_(std::move(error_responder)),
        log_(std::move(log)),
        acceptor_strand_(asio::make_strand(io)),
        acceptor_(acceptor_strand_) {}

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

// Sends the body of a streaming reply, one HTTP chunk per write().
template <class Stream>
class ChunkWriter final : public StreamWriter {
 public:
  ChunkWriter(Stream& stream, std::chrono::seconds timeout) : stream_(stream), timeout_(timeout) {}

  asio::awaitable<bool> write(std::string_view data) override {
    if (!ok_) co_return false;
    if (data.empty()) co_return true;  // a zero-size chunk would end the body
    beast::get_lowest_layer(stream_).expires_after(timeout_);
    beast::error_code ec;
    co_await asio::async_write(stream_, bhttp::make_chunk(asio::buffer(data.data(), data.size())),
                               redirect(ec));
    if (ec) ok_ = false;
    co_return ok_;
  }

  bool ok() const { return ok_; }

 private:
  Stream& stream_;
  std::chrono::seconds timeout_;
  bool ok_ = true;
};

// Cancels a file reply's socket waits when no byte has moved for `timeout`.
// Armed once per timeout period (not per wait): the handler re-arms itself
// for the rest of the period when there was progress since it was set.
// Everything runs on the session's strand.
struct FileWatch {
  FileWatch(asio::any_io_executor ex, tcp::socket& s, std::chrono::seconds t)
      : timer(std::move(ex)), socket(s), timeout(t) {}
  asio::steady_timer timer;
  tcp::socket& socket;  // valid while !done (the session is running the reply)
  std::chrono::seconds timeout;
  SteadyClock::time_point last_progress = SteadyClock::now();
  bool done = false;
  bool fired = false;

  static void arm(const std::shared_ptr<FileWatch>& w) {
    w->timer.expires_at(w->last_progress + w->timeout);
    w->timer.async_wait([w](const beast::error_code& ec) {
      if (ec || w->done) return;
      if (SteadyClock::now() - w->last_progress < w->timeout) {
        arm(w);
        return;
      }
      w->fired = true;
      beast::error_code ignored;
      w->socket.cancel(ignored);
    });
  }
  void finish() {
    done = true;
    timer.cancel();
  }
};

// The body of a claimed request (ServerOptions::streamed_body), read on the
// handler's demand straight into its buffer (buffer_body): see BodyReader.
template <class Stream>
class StreamedBody final : public BodyReader {
 public:
  using Parser = bhttp::request_parser<bhttp::buffer_body>;

  StreamedBody(Stream& stream, beast::flat_buffer& buffer, Parser& parser, const ServerOptions& opt,
               bool expect_continue)
      : stream_(stream), buffer_(buffer), parser_(parser), opt_(opt), expect_continue_(expect_continue) {}

  asio::awaitable<Result<std::size_t>> read_some(char* data, std::size_t size) override {
    if (failed_) co_return Error(Code::kUnavailable, "the request body cannot be read any more");
    const std::size_t none = 0;
    if (parser_.is_done()) co_return none;
    if (size == 0) co_return Error(Code::kInternal, "read_some needs room for at least one byte");
    beast::tcp_stream& lowest = beast::get_lowest_layer(stream_);
    beast::error_code ec;
    if (!started_) {
      started_ = true;
      if (expect_continue_) {
        bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, parser_.get().version()};
        lowest.expires_after(opt_.write_timeout);
        co_await bhttp::async_write(stream_, go_on, redirect(ec));
        if (ec) {
          failed_ = true;
          co_return Error(Code::kUnavailable, "the client went away before sending the body");
        }
      }
      lowest.expires_after(opt_.read_timeout);
    }
    while (true) {
      parser_.get().body().data = data;
      parser_.get().body().size = size;
      parser_.get().body().more = true;
      co_await bhttp::async_read_some(stream_, buffer_, parser_, redirect(ec));
      if (ec == bhttp::error::need_buffer) ec = {};
      const std::size_t got = size - parser_.get().body().size;
      parser_.get().body().data = nullptr;
      if (ec) {
        failed_ = true;
        co_return failure(ec);
      }
      if (got == 0 && !parser_.is_done()) continue;  // a chunk header, no data yet
      // The deadline moves on only after a stretch of real progress.
      since_armed_ += got;
      if (since_armed_ >= kBodyProgressBytes) {
        since_armed_ = 0;
        lowest.expires_after(opt_.read_timeout);
      }
      co_return got;
    }
  }

  std::optional<uint64_t> content_length() const override {
    boost::optional<std::uint64_t> n = parser_.content_length();
    if (!n) return std::nullopt;
    return *n;
  }

  // Whether the connection can carry another request after the reply.
  bool complete() const { return !failed_ && parser_.is_done(); }

 private:
  Error failure(const beast::error_code& ec) const {
    if (ec == bhttp::error::body_limit) return Error(Code::kPayloadTooLarge, "the request body is too large");
    if (ec == beast::error::timeout)
      return Error(Code::kTimeout, "the request body arrived too slowly (read timeout)");
    if (is_disconnect(ec)) return Error(Code::kUnavailable, "the client went away before the body was complete");
    return Error(Code::kInvalidArgument, "malformed request body: " + ec.message());
  }

  Stream& stream_;
  beast::flat_buffer& buffer_;
  Parser& parser_;
  const ServerOptions& opt_;
  bool expect_continue_;
  bool started_ = false;
  bool failed_ = false;
  std::size_t since_armed_ = 0;
};

// One connection. All its I/O runs on the strand its socket was accepted on.
template <class Stream>
class Session final : public Connection {
 public:
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
  static void describe(Exchange& ex, const RequestHeader& head) {
    if (!head.method_string().empty()) ex.method = std::string(head.method_string());
    if (!head.target().empty()) ex.path = path_of(head.target());
    const std::string_view client_id = head["X-Request-Id"];
    ex.request_id = is_sane_request_id(client_id) ? std::string(client_id) : new_uuid();
  }

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
  asio::awaitable<bool> send_file_buffered(const FileBody& body);
  asio::awaitable<bool> send_file_zero_copy(const FileBody& body);
  asio::awaitable<void> send_error(Exchange& ex, int status, std::string_view detail);
  asio::awaitable<void> shutdown();
  void log_exchange(const Exchange& ex, std::string_view outcome) const;

  std::shared_ptr<ServerCore> server_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::string remote_;
  bool reject_;
};

template <class Stream>
asio::awaitable<void> Session<Stream>::run() {
  if constexpr (kIsTls<Stream>) {
    if (!co_await handshake()) co_return;
  }
  bool first = true;
  while (!server_->stopping()) {
    if (!co_await wait_for_request(first)) break;
    first = false;
    if (!co_await serve_one()) break;
  }
  co_await shutdown();
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::handshake() {
  beast::error_code ec;
  lowest().expires_after(server_->options().read_timeout);
  co_await stream_.async_handshake(ssl::stream_base::server, redirect(ec));
  if (ec) {
    server_->log().debug("tls handshake failed", {{"remote", remote_}, {"error", ec.message()}});
    co_return false;
  }
  co_return true;
}

// Waits for the first byte of the next request: a fresh connection gets the
// read deadline, a kept-alive one the (usually longer) idle deadline.
template <class Stream>
asio::awaitable<bool> Session<Stream>::wait_for_request(bool first) {
  if (buffer_.size() > 0) co_return true;  // pipelined bytes already here
  const auto& opt = server_->options();
  lowest().expires_after(first ? opt.read_timeout : opt.idle_timeout);
  beast::error_code ec;
  std::size_t n = co_await stream_.async_read_some(buffer_.prepare(kFirstReadBytes), redirect(ec));
  if (ec) co_return false;
  buffer_.commit(n);
  co_return true;
}

// Reads one request, runs the handler and writes the reply. Returns whether
// the connection stays open for another request.
template <class Stream>
asio::awaitable<bool> Session<Stream>::serve_one() {
  const auto& opt = server_->options();
  Exchange ex;
  beast::error_code ec;

  // The header first; the body limit depends on the route (streamed_body),
  // so it is checked here by hand once the header is complete.
  bhttp::request_parser<bhttp::empty_body> header;
  header.header_limit(static_cast<std::uint32_t>(
      std::min<std::size_t>(opt.header_limit, std::numeric_limits<std::uint32_t>::max())));
  // (Not boost::none: Beast 1.74 compares Content-Length > none as true.)
  header.body_limit(std::numeric_limits<std::uint64_t>::max());

  lowest().expires_after(opt.read_timeout);
  co_await bhttp::async_read_header(stream_, buffer_, header, redirect(ec));
  if (ec) {
    describe(ex, header.get());
    if (ec == bhttp::error::header_limit) {
      co_await send_error(ex, 431, "request header too large");
    } else if (!is_disconnect(ec)) {
      co_await send_error(ex, 400, "malformed HTTP request");
    }
    co_return false;
  }
  describe(ex, header.get());
  // Framing Beast would guess at (request_framing.h): refused before the
  // body, and the connection closed, since where this request ends and the
  // next begins is unknown.
  if (Status framing = check_request_framing(header.get()); !framing) {
    co_await send_error(ex, 400, framing.error().message);
    co_return false;
  }
  // What the check accepts Beast reads as chunked; should the two ever
  // disagree, refuse rather than let Beast frame the body its own way.
  if (header.get().count(bhttp::field::transfer_encoding) > 0 && !header.chunked()) {
    co_await send_error(ex, 400, "Transfer-Encoding: not understood");
    co_return false;
  }

  std::optional<uint64_t> streamed;
  if (opt.streamed_body) {
    std::string failure;
    try {
      streamed = opt.streamed_body(header.get());
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (!failure.empty()) {
      server_->log().error("http streamed_body threw", {{"request_id", ex.request_id}, {"error", failure}});
      co_await send_error(ex, 500, "internal error");
      co_return false;
    }
  }
  // A declared Content-Length over the limit: 413 before any of the body is read.
  const uint64_t limit = streamed ? *streamed : static_cast<uint64_t>(opt.body_limit);
  const boost::optional<std::uint64_t> declared = header.content_length();
  if (declared && *declared > limit) {
    co_await send_error(ex, 413, "request body too large");
    co_return false;
  }
  if (streamed) {
    bool kept = co_await serve_streamed(ex, header, *streamed);
    co_return kept;
  }

  bhttp::request_parser<bhttp::string_body> parser{std::move(header)};
  parser.body_limit(opt.body_limit);  // chunked bodies are counted as they arrive
  const Request& head = parser.get();

  if (beast::iequals(head[bhttp::field::expect], "100-continue")) {
    bhttp::response<bhttp::empty_body> go_on{bhttp::status::continue_, head.version()};
    lowest().expires_after(opt.write_timeout);
    co_await bhttp::async_write(stream_, go_on, redirect(ec));
    if (ec) co_return false;
    lowest().expires_after(opt.read_timeout);
  }

  co_await bhttp::async_read(stream_, buffer_, parser, redirect(ec));
  if (ec) {
    if (ec == bhttp::error::body_limit) {
      co_await send_error(ex, 413, "request body too large");
    } else if (!is_disconnect(ec)) {
      co_await send_error(ex, 400, "malformed HTTP request");
    }
    co_return false;
  }
  Request req = parser.release();

  if (reject_) {
    co_await send_error(ex, 503, "too many connections");
    co_return false;
  }

  RequestInfo info{ex.request_id, remote_, kIsTls<Stream>, nullptr};
  bool kept = co_await respond(ex, req, info, nullptr);
  co_return kept;
}

// A claimed request: the handler gets the header and a BodyReader.
template <class Stream>
asio::awaitable<bool> Session<Stream>::serve_streamed(Exchange& ex,
                                                      bhttp::request_parser<bhttp::empty_body>& header,
                                                      uint64_t limit) {
  typename StreamedBody<Stream>::Parser parser{std::move(header)};
  parser.body_limit(limit);
  if (reject_) {
    co_await send_error(ex, 503, "too many connections");
    co_return false;
  }
  Request req;
  req.base() = parser.get().base();
  const bool expect_continue = beast::iequals(req[bhttp::field::expect], "100-continue");
  StreamedBody<Stream> body(stream_, buffer_, parser, server_->options(), expect_continue);
  RequestInfo info{ex.request_id, remote_, kIsTls<Stream>, &body};
  bool kept = co_await respond(ex, req, info, &body);
  co_return kept;
}

// Runs the handler and sends its reply. Returns whether the connection stays
// open: not when the client or the server is closing, nor when a streamed
// body was left unread.
template <class Stream>
asio::awaitable<bool> Session<Stream>::respond(Exchange& ex, Request& req, RequestInfo& info,
                                               const StreamedBody<Stream>* streamed) {
  Reply reply;
  std::string failure;
  try {
    reply = co_await server_->handler()(req, info);
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "non-standard exception";
  }
  if (!failure.empty()) {
    server_->log().error("http handler threw",
                         {{"request_id", ex.request_id}, {"path", ex.path}, {"error", failure}});
    reply = Reply{server_->error_response(500, "internal error"), {}};
  }
  info.body = nullptr;
  const bool body_read = streamed == nullptr || streamed->complete();
  const bool keep_alive = req.keep_alive() && !server_->stopping() && body_read;
  const bool head_only = req.method() == bhttp::verb::head;
  bool kept = co_await send_reply(ex, reply, req.version(), keep_alive, head_only);
  co_return kept;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::send_reply(Exchange& ex, Reply& reply, unsigned version,
                                                  bool keep_alive, bool head_only) {
  const auto& opt = server_->options();
  Response& res = reply.response;
  res.version(version);
  res.keep_alive(keep_alive);
  res.set("X-Request-Id", ex.request_id);
  ex.status = res.result_int();
  beast::error_code ec;

  if (!reply.stream && reply.file) {
    bool kept = co_await send_file(ex, reply, keep_alive, head_only);
    co_return kept;
  }
  if (!reply.stream && head_only) {
    // HEAD: the headers a GET would have (Content-Length included), no body.
    finalize_payload(res);
    bhttp::response_serializer<bhttp::string_body> sr{res};
    lowest().expires_after(opt.write_timeout);
    co_await bhttp::async_write_header(stream_, sr, redirect(ec));
    log_exchange(ex, ec ? "write failed" : "");
    co_return !ec && keep_alive;
  }
  if (!reply.stream) {
    finalize_payload(res);
    lowest().expires_after(opt.write_timeout);
    co_await bhttp::async_write(stream_, res, redirect(ec));
    log_exchange(ex, ec ? "write failed" : "");
    co_return !ec && keep_alive;
  }

  // Streaming: header with chunked transfer encoding, then one chunk per write.
  bhttp::response<bhttp::empty_body> head;
  head.base() = res.base();
  head.erase(bhttp::field::content_length);
  head.chunked(true);
  bhttp::response_serializer<bhttp::empty_body> sr{head};
  lowest().expires_after(opt.write_timeout);
  co_await bhttp::async_write_header(stream_, sr, redirect(ec));
  if (ec) {
    log_exchange(ex, "write failed");
    co_return false;
  }
  ChunkWriter<Stream> writer(stream_, opt.write_timeout);
  std::string failure;
  try {
    co_await reply.stream(writer);
  } catch (const std::exception& e) {
    failure = e.what();
  } catch (...) {
    failure = "non-standard exception";
  }
  if (!failure.empty()) {
    // The status line is gone already; all we can do is cut the body short.
    server_->log().error("http stream threw",
                         {{"request_id", ex.request_id}, {"path", ex.path}, {"error", failure}});
    log_exchange(ex, "stream aborted");
    co_return false;
  }
  if (writer.ok()) {
    lowest().expires_after(opt.write_timeout);
    co_await asio::async_write(stream_, bhttp::make_chunk_last(), redirect(ec));
  }
  const bool ended_cleanly = writer.ok() && !ec;
  log_exchange(ex, ended_cleanly ? "" : "peer gone");
  co_return ended_cleanly && keep_alive;
}

// Sends a file reply: the header (Content-Length = the range's length), then
// the bytes unless this answers a HEAD.
template <class Stream>
asio::awaitable<bool> Session<Stream>::send_file(Exchange& ex, Reply& reply, bool keep_alive,
                                                 bool head_only) {
  const auto& opt = server_->options();
  const FileBody& body = *reply.file;
  bhttp::response<bhttp::empty_body> head;
  head.base() = reply.response.base();
  head.chunked(false);
  head.content_length(body.length);
  bhttp::response_serializer<bhttp::empty_body> sr{head};
  beast::error_code ec;
  lowest().expires_after(opt.write_timeout);
  co_await bhttp::async_write_header(stream_, sr, redirect(ec));
  if (ec) {
    log_exchange(ex, "write failed");
    co_return false;
  }
  if (head_only || body.length == 0 || !body.file) {
    log_exchange(ex, "");
    co_return keep_alive;
  }
  bool sent = false;
  if constexpr (kIsTls<Stream>) {
    sent = co_await send_file_buffered(body);
  } else {
    sent = co_await send_file_zero_copy(body);
  }
  log_exchange(ex, sent ? "" : "body not completed");
  co_return sent && keep_alive;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::send_file_buffered(const FileBody& body) {
  const auto& opt = server_->options();
  std::vector<char> buf(kFileBufferBytes);
  uint64_t offset = body.offset;
  uint64_t left = body.length;
  beast::error_code ec;
  while (left > 0) {
    const std::size_t want = static_cast<std::size_t>(std::min<uint64_t>(left, buf.size()));
    const ssize_t n = ::pread(body.file->fd(), buf.data(), want, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      server_->log().warn("file reply cut short", {{"remote", remote_},
                                                   {"error", n < 0 ? std::strerror(errno) : "end of file"}});
      co_return false;
    }
    lowest().expires_after(opt.write_timeout);
    co_await asio::async_write(stream_, asio::buffer(buf.data(), static_cast<std::size_t>(n)), redirect(ec));
    if (ec) co_return false;
    offset += static_cast<uint64_t>(n);
    left -= static_cast<uint64_t>(n);
  }
  co_return true;
}

template <class Stream>
asio::awaitable<bool> Session<Stream>::send_file_zero_copy(const FileBody& body) {
  tcp::socket& sock = lowest().socket();
  beast::error_code ec;
  sock.native_non_blocking(true, ec);
  if (ec) co_return false;
  auto watch = std::make_shared<FileWatch>(stream_.get_executor(), sock, server_->options().write_timeout);
  FileWatch::arm(watch);
  off_t offset = static_cast<off_t>(body.offset);
  uint64_t left = body.length;
  uint64_t since_yield = 0;
  bool ok = true;
  std::string failure;
  while (left > 0) {
    const std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(left, 1u << 30));
    const ssize_t n = ::sendfile(sock.native_handle(), body.file->fd(), &offset, chunk);
    if (n > 0) {
      left -= static_cast<uint64_t>(n);
      since_yield += static_cast<uint64_t>(n);
      watch->last_progress = SteadyClock::now();
      if (since_yield >= kFileYieldBytes && left > 0) {
        since_yield = 0;
        co_await asio::post(stream_.get_executor(), asio::use_awaitable);
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      since_yield = 0;
      co_await sock.async_wait(tcp::socket::wait_write, redirect(ec));
      if (ec) {
        ok = false;
        break;
      }
      continue;
    }
    // 0: the file is shorter than promised; <0: the peer is gone (EPIPE,
    // ECONNRESET) or the file cannot be read (EIO).
    ok = false;
    failure = n == 0 ? "end of file" : std::strerror(errno);
    break;
  }
  watch->finish();
  if (!failure.empty() && failure != std::strerror(EPIPE) && failure != std::strerror(ECONNRESET))
    server_->log().warn("file reply cut short", {{"remote", remote_}, {"error", failure}});
  co_return ok;
}

// Answers with the server's own error reply and marks the connection for close.
template <class Stream>
asio::awaitable<void> Session<Stream>::send_error(Exchange& ex, int status,
                                                  std::string_view detail) {
  Response res = server_->error_response(status, detail);
  res.version(11);
  res.keep_alive(false);
  res.set("X-Request-Id", ex.request_id);
  finalize_payload(res);
  ex.status = res.result_int();
  beast::error_code ec;
  lowest().expires_after(server_->options().write_timeout);
  co_await bhttp::async_write(stream_, res, redirect(ec));
  log_exchange(ex, ec ? "write failed" : "");
}

// Closes politely: TLS close_notify, or a TCP half-close followed by a short
// drain of whatever the peer still sends (an unread request body would
// otherwise make the kernel reset the connection and lose our last reply).
template <class Stream>
asio::awaitable<void> Session<Stream>::shutdown() {
  if (!lowest().socket().is_open()) co_return;
  const auto linger = std::min<std::chrono::seconds>(kLinger, server_->options().read_timeout);
  beast::error_code ec;
  if constexpr (kIsTls<Stream>) {
    lowest().expires_after(linger);
    co_await stream_.async_shutdown(redirect(ec));
  } else {
    lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    lowest().expires_after(linger);
    char sink[4096];
    std::size_t drained = 0;
    while (!ec && drained < kLingerMaxBytes) {
      drained += co_await lowest().async_read_some(asio::buffer(sink), redirect(ec));
    }
  }
  lowest().close();
}

template <class Stream>
void Session<Stream>::log_exchange(const Exchange& ex, std::string_view outcome) const {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - ex.start);
  if (outcome.empty()) {
    server_->log().info("http request", {{"method", ex.method},
                                         {"path", ex.path},
                                         {"status", std::to_string(ex.status)},
                                         {"duration_ms", std::to_string(ms.count())},
                                         {"request_id", ex.request_id},
                                         {"remote", remote_}});
  } else {
    server_->log().info("http request", {{"method", ex.method},
                                         {"path", ex.path},
                                         {"status", std::to_string(ex.status)},
                                         {"duration_ms", std::to_string(ms.count())},
                                         {"request_id", ex.request_id},
                                         {"remote", remote_},
                                         {"outcome", std::string(outcome)}});
  }
}

template <class S>
asio::awaitable<void> run_session(std::shared_ptr<S> session) {
  co_await session->run();
}

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

}  // namespace

Result<std::shared_ptr<OpenFile>> OpenFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    std::string msg = path + ": " + std::strerror(e);
    if (e == ENOENT || e == ENOTDIR) return Error(Code::kNotFound, msg);
    if (e == EACCES || e == EPERM) return Error(Code::kPermissionDenied, msg);
    return Error(Code::kInternal, msg);
  }
  Result<std::shared_ptr<OpenFile>> file = adopt(fd);
  if (!file) return Error(file.error().code, path + ": " + file.error().message);
  return file;
}

Result<std::shared_ptr<OpenFile>> OpenFile::adopt(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(Code::kInvalidArgument, "not a regular file");
  }
  return std::shared_ptr<OpenFile>(new OpenFile(fd, static_cast<uint64_t>(st.st_size)));
}

OpenFile::~OpenFile() { ::close(fd_); }

struct HttpServer::Impl : ServerCore {
  using ServerCore::ServerCore;
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
