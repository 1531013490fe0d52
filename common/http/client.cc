// HttpClient implementation.
//
// A request is: parse the URL, take an idle connection for its pool key (the
// origin plus the TLS trust settings, so a connection opened without
// verification never serves a request that wants it) or open one (resolve,
// connect, TLS handshake with SNI and host check), write, read, and give the
// connection back when both sides agreed to keep it alive.
//
// One deadline covers the whole request: it is set as the tcp_stream expiry
// before every operation, and a timer cancels name resolution (the resolver
// has no expiry of its own).
//
// A pooled connection may have been closed by the server while it sat idle.
// take_idle() drops any whose socket shows EOF or unexpected bytes (a peek, no
// read); a connection that dies anyway between the peek and our write is
// retried once on a fresh connection, for idempotent methods only, and only
// when no byte of a response had arrived.
//
// The idle pool is one list of every idle connection, least recently used
// first, with each key's positions in it beside: taking the most recent of a
// key, closing the oldest over max_idle_total and dropping those past
// idle_timeout (always at the front) are each a few steps, however many hosts
// the client has seen. Connections are closed outside the lock.
//
// TLS sessions: after the first answer on a new TLS connection (by then a TLS
// 1.3 server's NewSessionTicket has been read, since it precedes any data),
// the connection's session is kept under the pool key if it can be resumed.
// The next new connection with that key takes it (SSL_set_session) before its
// handshake. Whether the server resumed it is counted, not assumed.
//
// The pool holds no pending operations, so an idle client never keeps the
// io_context running.

#include "common/http/client.h"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <openssl/x509.h>

#include "common/http/tls_client_stream.h"
#include "common/http/tls_context.h"

namespace kiln::http {

namespace {

using tcp = asio::ip::tcp;
namespace ssl = asio::ssl;
using PlainStream = beast::tcp_stream;
using TlsStream = TlsClientStream;
using SteadyClock = std::chrono::steady_clock;

constexpr std::uint32_t kResponseHeaderLimit = 64 * 1024;

auto redirect(beast::error_code& ec) { return asio::redirect_error(asio::use_awaitable, ec); }


bool is_idempotent(bhttp::verb v) {
  switch (v) {
    case bhttp::verb::get:
    case bhttp::verb::head:
    case bhttp::verb::put:
    case bhttp::verb::delete_:
    case bhttp::verb::options:
    case bhttp::verb::trace:
      return true;
    default:
      return false;
  }
}

Error transport_error(const beast::error_code& ec, std::string_view step, const Url& url) {
  const std::string where = std::string(step) + " " + url.origin();
  if (ec == beast::error::timeout) return Error(Code::kTimeout, where + ": deadline exceeded");
  if (ec == bhttp::error::body_limit) {
    return Error(Code::kPayloadTooLarge, where + ": response body too large");
  }
  return Error(Code::kUnavailable, where + ": " + ec.message());
}

struct SessionFree {
  void operator()(SSL_SESSION* s) const { SSL_SESSION_free(s); }
};
using SessionPtr = std::unique_ptr<SSL_SESSION, SessionFree>;

// One open connection to an origin.
struct Connection {
  std::unique_ptr<PlainStream> plain;
  std::unique_ptr<TlsStream> tls;
  beast::flat_buffer buffer;
  SteadyClock::time_point idle_since;
  bool session_saved = false;  // its TLS session is (or was) in the cache

  beast::tcp_stream& lowest() { return tls ? tls->next_layer() : *plain; }

  // True when the peer closed (or sent anything) while we were not asking.
  bool stale() {
    auto& socket = lowest().socket();
    if (!socket.is_open() || buffer.size() > 0 || (tls && tls->has_buffered_input())) return true;
    char byte;
    const ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n >= 0) return true;
    return !(errno == EAGAIN || errno == EWOULDBLOCK);
  }
};

struct Outcome {
  std::optional<Response> response;
  Error error;
  bool reusable = false;
  bool got_response_bytes = false;
};

template <class Stream>
asio::awaitable<Outcome> exchange(Stream& stream, beast::flat_buffer& buffer,
                                  const bhttp::request<bhttp::string_body>& msg,
                                  SteadyClock::time_point deadline, std::size_t max_body,
                                  const Url& url) {
  Outcome out;
  beast::error_code ec;
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_at(deadline);
  co_await bhttp::async_write(stream, msg, redirect(ec));
  if (ec) {
    out.error = transport_error(ec, "write to", url);
    co_return out;
  }
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(kResponseHeaderLimit);
  parser.body_limit(max_body);
  if (msg.method() == bhttp::verb::head) parser.skip(true);
  // Header first: Beast 1.74's eager parse loses the body_limit error that a
  // too-large Content-Length raises when body bytes arrive with the header.
  lowest.expires_at(deadline);
  co_await bhttp::async_read_header(stream, buffer, parser, redirect(ec));
  if (!ec) {
    lowest.expires_at(deadline);
    co_await bhttp::async_read(stream, buffer, parser, redirect(ec));
  }
  if (ec) {
    out.got_response_bytes = parser.got_some() || buffer.size() > 0;
    out.error = transport_error(ec, "read from", url);
    co_return out;
  }
  out.response = parser.release();
  out.reusable = out.response->keep_alive() && msg.keep_alive() && buffer.size() == 0;
  co_return out;
}

// Reads a response whose body may never end: the header under the request's
// deadline, then the body piece by piece, each read under `silence`.
template <class Stream>
asio::awaitable<Result<Response>> stream_exchange(Stream& stream, beast::flat_buffer& buffer,
                                                  const bhttp::request<bhttp::string_body>& msg,
                                                  SteadyClock::time_point deadline,
                                                  std::chrono::milliseconds silence, std::size_t max_body,
                                                  const Url& url,
                                                  const std::function<bool(std::string_view)>& on_data) {
  beast::error_code ec;
  auto& lowest = beast::get_lowest_layer(stream);
  lowest.expires_at(deadline);
  co_await bhttp::async_write(stream, msg, redirect(ec));
  if (ec) co_return transport_error(ec, "write to", url);
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(kResponseHeaderLimit);
  parser.body_limit(boost::none);  // an event stream has no end; silence bounds it instead
  co_await bhttp::async_read_header(stream, buffer, parser, redirect(ec));
  if (ec) co_return transport_error(ec, "read from", url);
  Response out{parser.get().result(), parser.get().version()};
  for (const auto& field : parser.get()) out.insert(field.name_string(), field.value());
  const bool success = out.result_int() / 100 == 2;
  std::array<char, 8192> chunk{};
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    lowest.expires_after(silence);
    co_await bhttp::async_read_some(stream, buffer, parser, redirect(ec));
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) co_return transport_error(ec, "read from", url);
    const std::size_t n = chunk.size() - parser.get().body().size;
    if (n == 0) continue;
    if (!success) {
      if (out.body().size() + n > max_body) co_return Error(Code::kPayloadTooLarge, "response body too large");
      out.body().append(chunk.data(), n);
    } else if (!on_data(std::string_view(chunk.data(), n))) {
      co_return out;
    }
  }
  co_return out;
}

}  // namespace

// ---------------------------------------------------------------------------
// HttpClient

struct HttpClient::Impl : std::enable_shared_from_this<HttpClient::Impl> {
  Impl(asio::any_io_executor ex, ClientOptions o) : executor(std::move(ex)), options(o) {}

  asio::awaitable<Result<Response>> request(ClientRequest req);
  asio::awaitable<Result<Response>> stream(ClientRequest req, std::function<bool(std::string_view)> on_data);
  asio::awaitable<Result<std::unique_ptr<Connection>>> connect(
      const Url& url, const std::shared_ptr<ssl::context>& ctx, bool verify, const std::string& key,
      SteadyClock::time_point deadline);
  Result<std::shared_ptr<ssl::context>> tls_context(bool verify, const std::string& ca_file);

  // What request() and stream() both send: the parsed URL, the TLS context
  // for https, the one deadline, and the message with Host, User-Agent, the
  // caller's headers and the body (moved out of `req`). kInvalidArgument for
  // a bad URL or header, kPayloadTooLarge for a body over max_body.
  struct Prepared {
    Url url;
    std::shared_ptr<ssl::context> ctx;  // null for http
    std::string key;                    // pool and TLS session key: origin + trust setting
    SteadyClock::time_point deadline;
    bhttp::request<bhttp::string_body> msg;
  };
  Result<Prepared> prepare(ClientRequest& req);
  std::unique_ptr<Connection> take_idle(const std::string& key);
  void put_idle(const std::string& key, std::unique_ptr<Connection> conn);
  void close();
  ClientStats stats();

  // The idle pool (see the file comment). Each helper runs under `mu` and
  // moves what it closes into `dead`, to be destroyed after the lock.
  struct IdleConnection {
    std::string key;
    std::unique_ptr<Connection> conn;
  };
  using IdleList = std::list<IdleConnection>;
  void drop_idle(IdleList::iterator pos, std::vector<std::unique_ptr<Connection>>& dead);
  void drop_expired(std::vector<std::unique_ptr<Connection>>& dead);

  SessionPtr take_session(const std::string& key);
  void save_session(const std::string& key, Connection& conn);

  const asio::any_io_executor executor;
  const ClientOptions options;

  std::mutex mu;  // guards the idle pool, the TLS sessions and tls_contexts
  IdleList idle;  // least recently used first
  std::unordered_map<std::string, std::vector<IdleList::iterator>> idle_by_key;  // most recent last
  std::list<std::string> session_order;  // keys, oldest session first
  struct KeptSession {
    SessionPtr session;
    std::list<std::string>::iterator order;
  };
  std::unordered_map<std::string, KeptSession> sessions;
  std::map<std::pair<bool, std::string>, std::shared_ptr<ssl::context>> tls_contexts;
  std::atomic<uint64_t> tls_handshakes{0};
  std::atomic<uint64_t> tls_resumed{0};
};

Result<std::shared_ptr<ssl::context>> HttpClient::Impl::tls_context(bool verify,
                                                                    const std::string& ca_file) {
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(verify, verify ? ca_file : std::string());
  if (auto it = tls_contexts.find(key); it != tls_contexts.end()) return it->second;
  auto ctx = make_client_tls_context(verify, ca_file);
  if (!ctx) return ctx.error();
  tls_contexts.emplace(key, *ctx);
  return *ctx;
}

void HttpClient::Impl::drop_idle(IdleList::iterator pos, std::vector<std::unique_ptr<Connection>>& dead) {
  auto mine = idle_by_key.find(pos->key);
  if (mine != idle_by_key.end()) {
    auto& v = mine->second;
    v.erase(std::remove(v.begin(), v.end(), pos), v.end());
    if (v.empty()) idle_by_key.erase(mine);
  }
  dead.push_back(std::move(pos->conn));
  idle.erase(pos);
}

void HttpClient::Impl::drop_expired(std::vector<std::unique_ptr<Connection>>& dead) {
  const auto oldest_allowed = SteadyClock::now() - options.idle_timeout;
  while (!idle.empty() && idle.front().conn->idle_since < oldest_allowed) drop_idle(idle.begin(), dead);
}

std::unique_ptr<Connection> HttpClient::Impl::take_idle(const std::string& key) {
  std::vector<std::unique_ptr<Connection>> dead;  // closed outside the lock
  std::unique_ptr<Connection> found;
  std::lock_guard<std::mutex> lock(mu);
  drop_expired(dead);
  auto it = idle_by_key.find(key);
  if (it == idle_by_key.end()) return nullptr;
  auto& mine = it->second;
  while (!mine.empty() && !found) {
    const IdleList::iterator pos = mine.back();  // most recently used first
    mine.pop_back();
    std::unique_ptr<Connection> conn = std::move(pos->conn);
    idle.erase(pos);
    if (conn->stale()) {
      dead.push_back(std::move(conn));
    } else {
      found = std::move(conn);
    }
  }
  if (mine.empty()) idle_by_key.erase(it);
  return found;
}

void HttpClient::Impl::put_idle(const std::string& key, std::unique_ptr<Connection> conn) {
  std::vector<std::unique_ptr<Connection>> dead;  // closed outside the lock
  conn->buffer.shrink_to_fit();  // empty between exchanges: nothing kept while idle
  std::lock_guard<std::mutex> lock(mu);
  conn->idle_since = SteadyClock::now();  // under the lock: the list stays in time order
  if (options.max_idle_per_origin == 0) {
    dead.push_back(std::move(conn));
    return;
  }
  // A full origin gives up its oldest: the newest is the least likely to
  // have been closed by the server in the meantime.
  if (auto mine = idle_by_key.find(key);
      mine != idle_by_key.end() && mine->second.size() >= options.max_idle_per_origin) {
    drop_idle(mine->second.front(), dead);
  }
  idle.push_back(IdleConnection{key, std::move(conn)});
  idle_by_key[key].push_back(std::prev(idle.end()));
  while (options.max_idle_total > 0 && idle.size() > options.max_idle_total) drop_idle(idle.begin(), dead);
  drop_expired(dead);
}

void HttpClient::Impl::close() {
  IdleList dropped;
  std::lock_guard<std::mutex> lock(mu);
  dropped.swap(idle);
  idle_by_key.clear();
}

ClientStats HttpClient::Impl::stats() {
  ClientStats s;
  {
    std::lock_guard<std::mutex> lock(mu);
    s.idle_connections = idle.size();
    s.tls_sessions = sessions.size();
    s.tls_contexts = tls_contexts.size();
  }
  s.tls_handshakes = tls_handshakes.load();
  s.tls_resumed = tls_resumed.load();
  return s;
}

SessionPtr HttpClient::Impl::take_session(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = sessions.find(key);
  if (it == sessions.end()) return nullptr;
  SessionPtr out = std::move(it->second.session);
  session_order.erase(it->second.order);
  sessions.erase(it);
  return out;
}

void HttpClient::Impl::save_session(const std::string& key, Connection& conn) {
  if (options.max_tls_sessions == 0 || !conn.tls || conn.session_saved) return;
  SSL_SESSION* live = SSL_get0_session(conn.tls->native_handle());
  // Not yet resumable (a TLS 1.3 server that sends its ticket later): the
  // next answer on this connection tries again.
  if (live == nullptr || SSL_SESSION_is_resumable(live) != 1) return;
  // A copy: when the connection is dropped without a close_notify (as idle
  // connections are), SSL_free marks its own session not resumable.
  SessionPtr s(SSL_SESSION_dup(live));
  if (!s) return;
  conn.session_saved = true;
  SessionPtr replaced;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = sessions.find(key); it != sessions.end()) {
    replaced = std::move(it->second.session);
    it->second.session = std::move(s);
    session_order.splice(session_order.end(), session_order, it->second.order);
    return;
  }
  session_order.push_back(key);
  sessions.emplace(key, KeptSession{std::move(s), std::prev(session_order.end())});
  while (sessions.size() > options.max_tls_sessions) {
    sessions.erase(session_order.front());
    session_order.pop_front();
  }
}

asio::awaitable<Result<std::unique_ptr<Connection>>> HttpClient::Impl::connect(
    const Url& url, const std::shared_ptr<ssl::context>& ctx, bool verify, const std::string& key,
    SteadyClock::time_point deadline) {
  beast::error_code ec;
  std::vector<tcp::endpoint> endpoints;
  const auto address = asio::ip::make_address(url.host, ec);
  if (!ec) {
    endpoints.emplace_back(address, url.port);
  } else {
    auto resolver = std::make_shared<tcp::resolver>(executor);
    asio::steady_timer timer(executor, deadline);
    timer.async_wait([resolver](const beast::error_code& e) {
      if (!e) resolver->cancel();
    });
    auto results = co_await resolver->async_resolve(url.host, std::to_string(url.port),
                                                    redirect(ec));
    timer.cancel();
    if (ec) {
      if (ec == asio::error::operation_aborted && SteadyClock::now() >= deadline) {
        co_return Error(Code::kTimeout, "resolve " + url.host + ": deadline exceeded");
      }
      co_return Error(Code::kUnavailable, "resolve " + url.host + ": " + ec.message());
    }
    for (const auto& r : results) endpoints.push_back(r.endpoint());
  }

  PlainStream stream(executor);
  stream.expires_at(deadline);
  co_await stream.async_connect(endpoints, redirect(ec));
  if (ec) co_return transport_error(ec, "connect to", url);
  stream.socket().set_option(tcp::no_delay(true), ec);

  auto conn = std::make_unique<Connection>();
  if (!ctx) {
    conn->plain = std::make_unique<PlainStream>(std::move(stream));
    co_return std::move(conn);
  }
  conn->tls = std::make_unique<TlsStream>(std::move(stream), ctx->native_handle());
  if (conn->tls->native_handle() == nullptr) {
    co_return Error(Code::kUnavailable, "tls with " + url.origin() + ": cannot allocate an SSL object");
  }
  if (auto st = set_client_tls_peer(conn->tls->native_handle(), url.host, verify); !st) {
    co_return st.take_error();
  }
  // The SSL takes its own reference; a session the server no longer accepts
  // just costs a full handshake.
  if (SessionPtr offered = take_session(key)) (void)SSL_set_session(conn->tls->native_handle(), offered.get());
  conn->tls->next_layer().expires_at(deadline);
  co_await conn->tls->async_handshake(redirect(ec));
  if (ec) {
    if (ec == beast::error::timeout) co_return transport_error(ec, "tls handshake with", url);
    std::string reason = ec.message();
    const long verify_result = SSL_get_verify_result(conn->tls->native_handle());
    if (verify && verify_result != X509_V_OK) {
      reason += " (" + std::string(X509_verify_cert_error_string(verify_result)) + ")";
    }
    co_return Error(Code::kUnavailable, "tls handshake with " + url.origin() + ": " + reason);
  }
  ++tls_handshakes;
  if (SSL_session_reused(conn->tls->native_handle()) == 1) ++tls_resumed;
  co_return conn;
}

Result<HttpClient::Impl::Prepared> HttpClient::Impl::prepare(ClientRequest& req) {
  auto url = Url::parse(req.url);
  if (!url) return url.error();
  Prepared p{*url, nullptr, url->origin(), SteadyClock::now() + req.timeout, {req.method, url->target, 11}};
  if (url->scheme == "https") {
    auto c = tls_context(req.verify_tls, req.ca_file);
    if (!c) return c.error();
    p.ctx = std::move(*c);
    p.key += req.verify_tls ? "|verify|" + req.ca_file : "|noverify";
  }
  const uint16_t default_port = url->scheme == "https" ? 443 : 80;
  p.msg.set(bhttp::field::host, url->bracketed_host() +
                                    (url->port == default_port ? "" : ":" + std::to_string(url->port)));
  p.msg.set(bhttp::field::user_agent, "kiln");
  p.msg.keep_alive(true);  // before the caller's headers, so "Connection: close" wins
  for (const auto& [name, value] : req.headers) {
    if (name.empty() || has_control_chars(name) || has_control_chars(value)) {
      return Error(Code::kInvalidArgument, "bad header " + name);
    }
    p.msg.set(name, value);
  }
  if (!req.body.empty()) {
    if (req.body.size() > options.max_body) {
      return Error(Code::kPayloadTooLarge, "request body too large");
    }
    p.msg.body() = std::move(req.body);
    if (!req.content_type.empty()) p.msg.set(bhttp::field::content_type, req.content_type);
  }
  p.msg.prepare_payload();
  return p;
}

asio::awaitable<Result<Response>> HttpClient::Impl::request(ClientRequest req) {
  auto self = shared_from_this();  // the pool outlives a destroyed HttpClient mid-request
  auto prepared = prepare(req);
  if (!prepared) co_return prepared.take_error();
  const Url& url = prepared->url;
  const auto& ctx = prepared->ctx;
  const auto deadline = prepared->deadline;
  auto& msg = prepared->msg;
  const std::string& key = prepared->key;

  for (int attempt = 0;; ++attempt) {
    std::unique_ptr<Connection> conn = attempt == 0 ? take_idle(key) : nullptr;
    const bool reused = conn != nullptr;
    if (!conn) {
      auto fresh = co_await connect(url, ctx, req.verify_tls, key, deadline);
      if (!fresh) co_return fresh.take_error();
      conn = std::move(*fresh);
    }
    // Not a ?: with a co_await in each arm: GCC 12 miscompiles that.
    Outcome out;
    if (conn->tls) {
      out = co_await exchange(*conn->tls, conn->buffer, msg, deadline, options.max_body, url);
    } else {
      out = co_await exchange(*conn->plain, conn->buffer, msg, deadline, options.max_body, url);
    }
    if (out.response) {
      save_session(key, *conn);
      if (out.reusable) put_idle(key, std::move(conn));
      co_return std::move(*out.response);
    }
    const bool retry = reused && attempt == 0 && !out.got_response_bytes &&
                       is_idempotent(req.method) && out.error.code == Code::kUnavailable;
    if (!retry) co_return std::move(out.error);
  }
}

asio::awaitable<Result<Response>> HttpClient::Impl::stream(ClientRequest req,
                                                            std::function<bool(std::string_view)> on_data) {
  auto self = shared_from_this();
  auto prepared = prepare(req);
  if (!prepared) co_return prepared.take_error();
  const Url& url = prepared->url;
  const auto deadline = prepared->deadline;
  auto& msg = prepared->msg;
  auto conn = co_await connect(url, prepared->ctx, req.verify_tls, prepared->key, deadline);
  if (!conn) co_return conn.take_error();
  Connection& c = **conn;
  Result<Response> out;
  if (c.tls) {
    out = co_await stream_exchange(*c.tls, c.buffer, msg, deadline, req.timeout, options.max_body, url, on_data);
  } else {
    out = co_await stream_exchange(*c.plain, c.buffer, msg, deadline, req.timeout, options.max_body, url, on_data);
  }
  co_return out;
}

HttpClient::HttpClient(asio::any_io_executor ex, ClientOptions options)
    : impl_(std::make_shared<Impl>(std::move(ex), options)) {}

HttpClient::~HttpClient() { impl_->close(); }

asio::awaitable<Result<Response>> HttpClient::request(ClientRequest req) {
  auto impl = impl_;
  co_return co_await impl->request(std::move(req));
}

asio::awaitable<Result<Response>> HttpClient::stream(ClientRequest req,
                                                      std::function<bool(std::string_view)> on_data) {
  auto impl = impl_;
  co_return co_await impl->stream(std::move(req), std::move(on_data));
}

void HttpClient::close() { impl_->close(); }

ClientStats HttpClient::stats() const { return impl_->stats(); }

}  // namespace kiln::http
