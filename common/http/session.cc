// Session<Stream> (session.h): one connection's request/response loop.

#include "common/http/session.h"

#include <algorithm>
#include <exception>
#include <limits>

#include <boost/asio/write.hpp>
#include <boost/beast/http/span_body.hpp>

#include "common/http/file_body.h"
#include "common/http/request_framing.h"
#include "common/ids.h"

namespace kiln::http::detail {

namespace {

// How long a closing connection keeps reading (and discarding) what the peer
// still sends, so that our last response is not destroyed by a TCP reset.
constexpr std::chrono::seconds kLinger{1};
constexpr std::size_t kLingerMaxBytes = 1024 * 1024;
constexpr std::size_t kFirstReadBytes = 4096;

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

}  // namespace

template <class Stream>
void Session<Stream>::describe(Exchange& ex, const RequestHeader& head) {
  if (!head.method_string().empty()) ex.method = std::string(head.method_string());
  if (!head.target().empty()) ex.path = path_of(head.target());
  const std::string_view client_id = head["X-Request-Id"];
  ex.request_id = is_sane_request_id(client_id) ? std::string(client_id) : new_uuid();
}

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
  if (!reply.stream && reply.shared_body) {
    // The header is the response's; the body is read from the shared string
    // in place (a span), gathered with the header into the same writes.
    bhttp::response<bhttp::span_body<const char>> out;
    out.base() = res.base();
    out.body() = beast::span<const char>(reply.shared_body->data(), reply.shared_body->size());
    out.prepare_payload();
    lowest().expires_after(opt.write_timeout);
    if (head_only) {
      bhttp::response_serializer<bhttp::span_body<const char>> sr{out};
      co_await bhttp::async_write_header(stream_, sr, redirect(ec));
    } else {
      co_await bhttp::async_write(stream_, out, redirect(ec));
    }
    log_exchange(ex, ec ? "write failed" : "");
    co_return !ec && keep_alive;
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
  const bool sent = co_await send_file_bytes(stream_, body, opt.write_timeout, server_->log(), remote_);
  log_exchange(ex, sent ? "" : "body not completed");
  co_return sent && keep_alive;
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
  // A request answered in full is a debug line: at the default level a
  // busy API writes nothing per request (failures are logged by the handler
  // that refused them, and below when the exchange itself went wrong), and
  // the fields are not even built.
  const LogLevel level = outcome.empty() ? LogLevel::kDebug : LogLevel::kInfo;
  if (!server_->log().enabled(level)) return;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - ex.start);
  if (outcome.empty()) {
    server_->log().debug("http request", {{"method", ex.method},
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

// run() is the one entry point used outside this file; what it calls is
// instantiated with it (handshake() only for TLS, as run() asks for it).
template asio::awaitable<void> Session<PlainStream>::run();
template asio::awaitable<void> Session<TlsStream>::run();

}  // namespace kiln::http::detail
