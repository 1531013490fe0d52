#include "tests/support/http_test_client.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace kiln::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

template <class Fields>
std::map<std::string, std::string> header_map(const Fields& fields) {
  std::map<std::string, std::string> out;
  for (const auto& f : fields) out[lower(f.name_string())] = std::string(f.value());
  return out;
}

[[noreturn]] void fail(std::string_view what, const beast::error_code& ec) {
  throw std::runtime_error("HttpTestClient: " + std::string(what) + ": " + ec.message());
}

// The connection was closed by the server before any of an answer arrived
// (request() retries an idempotent request once when it had been kept alive).
struct ClosedBeforeAnswer : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

std::string TestResponse::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

// Each blocking call starts one async operation with a deadline on the
// private io_context and runs it to completion: Beast's timeouts work only on
// asynchronous operations.
struct HttpTestClient::Impl {
  Impl(std::string h, uint16_t p, bool t, std::chrono::milliseconds to)
      : host(std::move(h)), port(p), tls(t), timeout(to) {
    ctx.set_verify_mode(asio::ssl::verify_none);
  }

  bool is_open() const {
    if (secure) return secure->next_layer().socket().is_open();
    return plain && plain->socket().is_open();
  }

  beast::tcp_stream& lowest() { return secure ? secure->next_layer() : *plain; }

  // Calls f(stream) with whichever stream is connected.
  template <class F>
  void with_stream(F&& f) {
    if (secure) {
      f(*secure);
    } else {
      f(*plain);
    }
  }

  void run() {
    io.restart();
    io.run();
  }

  void disconnect() {
    beast::error_code ec;
    if (is_open()) {
      lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
      lowest().close();
    }
    secure.reset();
    plain.reset();
    buffer.clear();
  }

  void connect() {
    disconnect();
    beast::error_code ec;
    tcp::endpoint ep(asio::ip::make_address(host, ec), port);
    if (ec) fail("bad host " + host, ec);
    beast::tcp_stream stream(io);
    if (!source.empty()) {
      // Bind the local end first: the connection comes from that address
      // (another loopback address stands in for another machine).
      stream.socket().open(ep.protocol());
      stream.socket().bind(tcp::endpoint(asio::ip::make_address(source), 0), ec);
      if (ec) fail("bind " + source, ec);
    }
    stream.expires_after(timeout);
    stream.async_connect(ep, [&](beast::error_code e) { ec = e; });
    run();
    if (ec) fail("connect", ec);
    ++connects;
    if (!tls) {
      plain = std::make_unique<beast::tcp_stream>(std::move(stream));
      return;
    }
    secure = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(std::move(stream), ctx);
    secure->next_layer().expires_after(timeout);
    secure->async_handshake(asio::ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
    run();
    if (ec) fail("tls handshake", ec);
  }

  void ensure_connected() {
    if (!is_open()) connect();
  }

  void write(std::string_view bytes) {
    ensure_connected();
    beast::error_code ec;
    lowest().expires_after(timeout);
    with_stream([&](auto& s) {
      asio::async_write(s, asio::buffer(bytes.data(), bytes.size()),
                        [&](beast::error_code e, std::size_t) { ec = e; });
    });
    run();
    if (ec == asio::error::broken_pipe || ec == asio::error::connection_reset) {
      disconnect();
      throw ClosedBeforeAnswer("HttpTestClient: write: " + ec.message());
    }
    if (ec) fail("write", ec);
  }

  TestResponse read_response() {
    if (!is_open()) throw std::runtime_error("HttpTestClient: not connected");
    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(1024 * 1024);
    parser.body_limit(256 * 1024 * 1024);
    beast::error_code ec;
    lowest().expires_after(timeout);
    with_stream([&](auto& s) {
      bhttp::async_read(s, buffer, parser, [&](beast::error_code e, std::size_t) { ec = e; });
    });
    run();
    if (ec) {
      disconnect();
      // Nothing of an answer arrived: the server closed (or reset) the connection.
      if (parser.got_some() == false &&
          (ec == bhttp::error::end_of_stream || ec == asio::error::connection_reset || ec == asio::error::eof))
        throw ClosedBeforeAnswer("HttpTestClient: read response: " + ec.message());
      fail("read response", ec);
    }
    TestResponse out;
    const auto& res = parser.get();
    out.status = static_cast<int>(res.result_int());
    out.headers = header_map(res);
    out.body = res.body();
    out.keep_alive = res.keep_alive();
    if (!out.keep_alive) disconnect();
    return out;
  }

  asio::io_context io;
  asio::ssl::context ctx{asio::ssl::context::tls_client};
  const std::string host;
  const uint16_t port;
  const bool tls;
  const std::chrono::milliseconds timeout;
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;
  int connects = 0;
  std::string source;
};

HttpTestClient::HttpTestClient(std::string host, uint16_t port, bool tls,
                               std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(std::move(host), port, tls, timeout)) {}

HttpTestClient::~HttpTestClient() { impl_->disconnect(); }

TestResponse HttpTestClient::request(std::string_view method, std::string_view target,
                                     std::string body, const Headers& headers) {
  bhttp::request<bhttp::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(bhttp::field::host, impl_->host + ":" + std::to_string(impl_->port));
  bool has_type = false;
  for (const auto& [name, value] : headers) {
    req.set(name, value);
    if (beast::iequals(name, "content-type")) has_type = true;
  }
  if (!body.empty()) {
    if (!has_type) req.set(bhttp::field::content_type, "application/json");
    req.body() = std::move(body);
    req.content_length(req.body().size());
  }
  std::string wire;
  {
    std::ostringstream os;
    os << req;
    wire = os.str();
  }
  // A kept-alive connection the server closed while it sat idle (its
  // keep-alive timeout) fails on first use with no byte of an answer: an
  // idempotent request is sent once more on a fresh connection, as HTTP
  // clients do (RFC 9110 9.2.2). A fresh connection's failure is the test's.
  const bool reused = impl_->is_open();
  const bool idempotent = method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE" ||
                          method == "OPTIONS";
  try {
    impl_->write(wire);
    return impl_->read_response();
  } catch (const ClosedBeforeAnswer&) {
    if (!reused || !idempotent) throw;
  }
  impl_->connect();
  impl_->write(wire);
  return impl_->read_response();
}

void HttpTestClient::reconnect() { impl_->connect(); }
void HttpTestClient::set_source(std::string address) {
  impl_->disconnect();
  impl_->source = std::move(address);
}
void HttpTestClient::close() { impl_->disconnect(); }
bool HttpTestClient::connected() const { return impl_->is_open(); }
int HttpTestClient::connect_count() const { return impl_->connects; }
void HttpTestClient::send_raw(std::string_view bytes) { impl_->write(bytes); }
TestResponse HttpTestClient::read_response() { return impl_->read_response(); }

bool HttpTestClient::wait_closed(std::chrono::milliseconds timeout) {
  if (!impl_->is_open()) return true;
  impl_->lowest().expires_after(timeout);
  beast::error_code ec;
  char sink[4096];
  while (!ec) {
    impl_->with_stream([&](auto& s) {
      s.async_read_some(asio::buffer(sink), [&](beast::error_code e, std::size_t) { ec = e; });
    });
    impl_->run();
  }
  const bool closed = ec != beast::error::timeout;
  impl_->disconnect();
  return closed;
}

SseResult HttpTestClient::read_sse(std::string_view target, std::size_t max_events,
                                   std::chrono::milliseconds timeout, const Headers& headers) {
  std::string wire = "GET " + std::string(target) + " HTTP/1.1\r\nHost: " + impl_->host +
                     "\r\nAccept: text/event-stream\r\n";
  for (const auto& [name, value] : headers) wire += name + ": " + value + "\r\n";
  wire += "\r\n";
  impl_->write(wire);

  SseResult out;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(256 * 1024 * 1024);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  beast::error_code ec;
  impl_->lowest().expires_at(deadline);
  impl_->with_stream([&](auto& s) {
    bhttp::async_read_header(s, impl_->buffer, parser,
                             [&](beast::error_code e, std::size_t) { ec = e; });
  });
  impl_->run();
  if (ec) {
    impl_->disconnect();
    fail("read stream header", ec);
  }
  out.status = static_cast<int>(parser.get().result_int());
  out.headers = header_map(parser.get());

  std::size_t consumed = 0;  // body bytes already split into events
  auto split = [&] {
    const std::string& body = parser.get().body();
    for (auto end = body.find("\n\n", consumed); end != std::string::npos;
         end = body.find("\n\n", consumed)) {
      out.events.push_back(body.substr(consumed, end - consumed));
      consumed = end + 2;
    }
  };
  split();
  while (out.events.size() < max_events && !parser.is_done()) {
    impl_->lowest().expires_at(deadline);
    impl_->with_stream([&](auto& s) {
      bhttp::async_read_some(s, impl_->buffer, parser,
                             [&](beast::error_code e, std::size_t) { ec = e; });
    });
    impl_->run();
    split();
    if (ec) break;
  }
  out.ended = parser.is_done() || (ec && ec != beast::error::timeout);
  if (ec || (parser.is_done() && !parser.get().keep_alive())) impl_->disconnect();
  return out;
}

}  // namespace kiln::testing
