// HttpClient and Url: against a real HttpServer (plain and TLS), a listener
// that never answers, and a port nobody listens on.

#include <catch2/catch.hpp>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "common/http/client.h"
#include "common/http/server.h"
#include "tests/support/self_signed_cert.h"
#include "tests/unit/http/test_server.h"

namespace kiln::http {
namespace {

using kiln::testing::SelfSignedCert;
using testing::TestServer;
using testing::test_options;
using namespace std::chrono_literals;
using tcp = asio::ip::tcp;

// Runs `aw` to completion on `io` (which nothing else runs) and returns its value.
template <class T>
T run_co(asio::io_context& io, asio::awaitable<T> aw) {
  std::optional<T> out;
  std::exception_ptr error;
  asio::co_spawn(
      io,
      [&out, aw = std::move(aw)]() mutable -> asio::awaitable<void> {
        out.emplace(co_await std::move(aw));
      },
      [&error](std::exception_ptr e) { error = e; });
  io.restart();
  io.run();
  if (error) std::rethrow_exception(error);
  return std::move(*out);
}

// n bytes that no shifted or repeated piece of could pass for.
std::string pattern(std::size_t n) {
  std::string out(n, '\0');
  uint32_t x = 2463534242u;
  for (auto& c : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return out;
}

Handler make_app() {
  return [](Request& req, const RequestInfo& info) -> asio::awaitable<Reply> {
    Reply r;
    r.response.result(bhttp::status::ok);
    const std::string target(req.target());
    if (target == "/info") {
      r.response.body() = info.remote;
    } else if (target.rfind("/echo", 0) == 0) {
      r.response.body() = std::string(req.method_string()) + " " + target + " " +
                          std::string(req[bhttp::field::content_type]) + " " +
                          std::string(req["X-Custom"]) + " " + req.body();
    } else if (target == "/big") {
      r.response.body() = std::string(1000, 'b');
    } else if (target.rfind("/bytes/", 0) == 0) {
      r.response.body() = pattern(std::stoul(target.substr(7)));
    } else if (target == "/redirect") {
      r.response.result(bhttp::status::temporary_redirect);
      r.response.set(bhttp::field::location, "/elsewhere");
    } else {
      r.response.result(bhttp::status::not_found);
    }
    co_return r;
  };
}

struct ClientEnv {
  explicit ClientEnv(ClientOptions o = {}) : client(io.get_executor(), o) {}
  Result<Response> send(ClientRequest r) { return run_co(io, client.request(std::move(r))); }
  Result<Response> get(const std::string& url) {
    ClientRequest r;
    r.url = url;
    r.timeout = 5s;
    return send(std::move(r));
  }
  asio::io_context io;
  HttpClient client;
};

std::string base(const TestServer& ts, const char* scheme = "http") {
  return std::string(scheme) + "://127.0.0.1:" + std::to_string(ts.port());
}

TEST_CASE("Url::parse accepts absolute http(s) URLs", "[http][url]") {
  auto u = Url::parse("https://Example.com:8443/redfish/v1?x=1#frag");
  REQUIRE(u);
  CHECK(u->scheme == "https");
  CHECK(u->host == "example.com");
  CHECK(u->port == 8443);
  CHECK(u->target == "/redfish/v1?x=1");
  CHECK(u->origin() == "https://example.com:8443");

  auto d = Url::parse("http://10.0.0.1");
  REQUIRE(d);
  CHECK(d->port == 80);
  CHECK(d->target == "/");
  auto s = Url::parse("HTTPS://bmc?q");
  REQUIRE(s);
  CHECK(s->port == 443);
  CHECK(s->target == "/?q");

  auto v6 = Url::parse("http://[fe80::1]:8080/x");
  REQUIRE(v6);
  CHECK(v6->host == "fe80::1");
  CHECK(v6->port == 8080);
  CHECK(v6->origin() == "http://[fe80::1]:8080");
  auto v6d = Url::parse("https://[::1]/");
  REQUIRE(v6d);
  CHECK(v6d->port == 443);
}

TEST_CASE("Url::parse rejects everything else", "[http][url]") {
  for (const char* bad : {"", "example.com/x", "ftp://h/", "http://", "http:///x", "http://h:0/",
                          "http://h:65536/", "http://h:12a/", "http://user:pw@h/",
                          "http://[::1/", "http://[nope]/", "http://h/a b", "http://a:b:c/"}) {
    auto u = Url::parse(bad);
    CHECK_FALSE(u);
    if (!u) CHECK(u.error().code == Code::kInvalidArgument);
  }
}

TEST_CASE("client GET and POST against the server", "[http][client]") {
  TestServer ts(test_options(), make_app());
  ClientEnv env;

  auto g = env.get(base(ts) + "/info");
  REQUIRE(g);
  CHECK(g->result_int() == 200);
  CHECK(g->body().rfind("127.0.0.1:", 0) == 0);

  ClientRequest p;
  p.method = bhttp::verb::post;
  p.url = base(ts) + "/echo?a=b";
  p.body = "{}";
  p.content_type = "application/json";
  p.headers = {{"X-Custom", "yes"}};
  auto r = env.send(p);
  REQUIRE(r);
  CHECK(r->body() == "POST /echo?a=b application/json yes {}");

  // 3xx comes back as is.
  auto redirect = env.get(base(ts) + "/redirect");
  REQUIRE(redirect);
  CHECK(redirect->result_int() == 307);
  CHECK((*redirect)[bhttp::field::location] == "/elsewhere");

  ClientRequest bad_header;
  bad_header.url = base(ts) + "/echo";
  bad_header.headers = {{"X-Evil", "a\r\nInjected: 1"}};
  auto bh = env.send(bad_header);
  REQUIRE_FALSE(bh);
  CHECK(bh.error().code == Code::kInvalidArgument);

  auto bad = env.get("not a url");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Code::kInvalidArgument);
}

TEST_CASE("client reuses keep-alive connections per origin", "[http][client]") {
  TestServer ts(test_options(), make_app());
  ClientEnv env;
  auto a = env.get(base(ts) + "/info");
  auto b = env.get(base(ts) + "/info");
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->body() == b->body());  // same client port: same connection
  CHECK(ts.server().connection_count() == 1);

  // "Connection: close" is honoured and the connection is not pooled.
  ClientRequest close_req;
  close_req.url = base(ts) + "/info";
  close_req.headers = {{"Connection", "close"}};
  auto c = env.send(close_req);
  REQUIRE(c);
  CHECK(c->body() == a->body());
  auto d = env.get(base(ts) + "/info");
  REQUIRE(d);
  CHECK(d->body() != a->body());

  env.client.close();
  CHECK(testing::eventually([&] { return ts.server().connection_count() == 0; }));
}

TEST_CASE("client shares its pool between concurrent requests", "[http][client]") {
  TestServer ts(test_options(), make_app());
  ClientOptions options;
  options.max_idle_per_origin = 3;
  ClientEnv env(options);
  std::vector<std::optional<Result<Response>>> results(10);
  for (auto& slot : results) {
    asio::co_spawn(
        env.io,
        [&slot, &env, url = base(ts) + "/info"]() -> asio::awaitable<void> {
          ClientRequest r;
          r.url = url;
          slot.emplace(co_await env.client.request(r));
        },
        asio::detached);
  }
  env.io.run();
  for (auto& slot : results) {
    REQUIRE(slot.has_value());
    REQUIRE(slot->ok());
    CHECK((*slot)->result_int() == 200);
  }
  // At most max_idle_per_origin connections stay open.
  CHECK(testing::eventually([&] { return ts.server().connection_count() <= 3; }));
}

TEST_CASE("client replaces a pooled connection the server closed", "[http][client]") {
  auto opt = test_options();
  opt.idle_timeout = 1s;
  TestServer ts(opt, make_app());
  ClientEnv env;
  auto a = env.get(base(ts) + "/info");
  REQUIRE(a);
  REQUIRE(testing::eventually([&] { return ts.server().connection_count() == 0; }, 3s));
  auto b = env.get(base(ts) + "/info");
  REQUIRE(b);
  CHECK(b->result_int() == 200);
  CHECK(b->body() != a->body());
}

TEST_CASE("client deadline against a listener that never answers, over TCP and in the TLS handshake", "[http][client]") {
  const std::string scheme = GENERATE("http", "https");
  asio::io_context lio;
  tcp::acceptor silent(lio, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  // Never accepted: the kernel completes the handshake, nobody ever reads.
  ClientEnv env;
  ClientRequest r;
  r.url = scheme + "://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/x";
  r.verify_tls = false;
  r.timeout = 300ms;
  const auto start = std::chrono::steady_clock::now();
  auto res = env.send(r);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(res);
  CHECK(res.error().code == Code::kTimeout);
  CHECK(elapsed >= 250ms);
  CHECK(elapsed < 2s);
}

TEST_CASE("client connection refused is kUnavailable", "[http][client]") {
  uint16_t port = 0;
  {
    asio::io_context lio;
    tcp::acceptor a(lio, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = a.local_endpoint().port();
  }  // closed: nobody listens there now
  ClientEnv env;
  auto res = env.get("http://127.0.0.1:" + std::to_string(port) + "/");
  REQUIRE_FALSE(res);
  CHECK(res.error().code == Code::kUnavailable);
  CHECK(res.error().message.find("refused") != std::string::npos);
}

TEST_CASE("client refuses response bodies over max_body", "[http][client]") {
  TestServer ts(test_options(), make_app());
  ClientOptions options;
  options.max_body = 100;
  ClientEnv env(options);
  auto res = env.get(base(ts) + "/big");
  REQUIRE_FALSE(res);
  CHECK(res.error().code == Code::kPayloadTooLarge);
  ClientEnv roomy;
  auto ok = roomy.get(base(ts) + "/big");
  REQUIRE(ok);
  CHECK(ok->body().size() == 1000);
}

TEST_CASE("client TLS verification", "[http][client][tls]") {
  SelfSignedCert cert;  // SAN: DNS:localhost, IP:127.0.0.1
  auto opt = test_options();
  opt.tls_cert_file = cert.cert_file();
  opt.tls_key_file = cert.key_file();
  TestServer ts(opt, make_app());
  ClientEnv env;
  const std::string url = base(ts, "https") + "/info";

  SECTION("verification against the system store fails") {
    auto res = env.get(url);
    REQUIRE_FALSE(res);
    CHECK(res.error().code == Code::kUnavailable);
    CHECK(res.error().message.find("certificate") != std::string::npos);
  }
  SECTION("verify_tls=false accepts it") {
    ClientRequest r;
    r.url = url;
    r.verify_tls = false;
    auto res = env.send(r);
    REQUIRE(res);
    CHECK(res->result_int() == 200);
    // A verifying request never borrows the unverified connection.
    auto strict = env.get(url);
    CHECK_FALSE(strict);
  }
  SECTION("the certificate as ca_file verifies, by IP and by name") {
    ClientRequest r;
    r.url = url;
    r.ca_file = cert.cert_file();
    auto res = env.send(r);
    REQUIRE(res);
    CHECK(res->result_int() == 200);
    r.url = "https://localhost:" + std::to_string(ts.port()) + "/info";
    auto named = env.send(r);
    REQUIRE(named);
    CHECK(named->result_int() == 200);
  }
  SECTION("an unreadable ca_file is kInvalidArgument") {
    ClientRequest r;
    r.url = url;
    r.ca_file = "/nonexistent/ca.pem";
    auto res = env.send(r);
    REQUIRE_FALSE(res);
    CHECK(res.error().code == Code::kInvalidArgument);
  }
}

TEST_CASE("client keeps at most max_idle_total idle connections over all origins, the most recent", "[http][client]") {
  // Four hosts (four servers), room for two idle connections in all.
  std::vector<std::unique_ptr<TestServer>> hosts;
  for (int i = 0; i < 4; ++i) hosts.push_back(std::make_unique<TestServer>(test_options(), make_app(), 1));
  ClientOptions options;
  options.max_idle_total = 2;
  ClientEnv env(options);
  std::vector<std::string> first_remote;
  for (auto& h : hosts) {
    auto r = env.get(base(*h) + "/info");
    REQUIRE(r);
    first_remote.push_back(r->body());
  }
  CHECK(env.client.stats().idle_connections == 2);
  // The two least recently used were closed, the two most recent kept.
  CHECK(testing::eventually([&] { return hosts[0]->server().connection_count() == 0; }));
  CHECK(testing::eventually([&] { return hosts[1]->server().connection_count() == 0; }));
  CHECK(hosts[2]->server().connection_count() == 1);
  CHECK(hosts[3]->server().connection_count() == 1);

  // A kept one is reused; a closed one is opened again, which closes the
  // least recently used kept one (hosts[3]: hosts[2] was just used).
  auto again = env.get(base(*hosts[2]) + "/info");
  REQUIRE(again);
  CHECK(again->body() == first_remote[2]);
  auto reopened = env.get(base(*hosts[0]) + "/info");
  REQUIRE(reopened);
  CHECK(reopened->body() != first_remote[0]);
  CHECK(env.client.stats().idle_connections == 2);
  CHECK(testing::eventually([&] { return hosts[3]->server().connection_count() == 0; }));
  CHECK(hosts[2]->server().connection_count() == 1);
}

TEST_CASE("client resumes the TLS session on a new connection to the same origin", "[http][client][tls]") {
  SelfSignedCert cert;
  auto opt = test_options();
  opt.tls_cert_file = cert.cert_file();
  opt.tls_key_file = cert.key_file();
  TestServer ts(opt, make_app());
  ClientOptions options;
  options.max_idle_per_origin = 0;  // every request opens a new connection
  ClientRequest unverified;
  unverified.url = base(ts, "https") + "/info";
  unverified.verify_tls = false;

  SECTION("each new connection resumes the session the previous one received") {
    ClientEnv env(options);
    for (int i = 0; i < 3; ++i) REQUIRE(env.send(unverified));
    ClientStats s = env.client.stats();
    CHECK(s.tls_handshakes == 3);
    CHECK(s.tls_resumed == 2);
    CHECK(s.tls_sessions == 1);
    CHECK(s.idle_connections == 0);

    // A session made without verification is never offered to a request
    // that verifies: that one makes a full handshake, then resumes its own.
    ClientRequest verified = unverified;
    verified.verify_tls = true;
    verified.ca_file = cert.cert_file();
    REQUIRE(env.send(verified));
    CHECK(env.client.stats().tls_resumed == 2);
    REQUIRE(env.send(verified));
    s = env.client.stats();
    CHECK(s.tls_handshakes == 5);
    CHECK(s.tls_resumed == 3);
    CHECK(s.tls_sessions == 2);
    CHECK(s.tls_contexts == 2);  // one per trust setting, not per connection
  }
  SECTION("max_tls_sessions 0 never resumes") {
    options.max_tls_sessions = 0;
    ClientEnv env(options);
    for (int i = 0; i < 3; ++i) REQUIRE(env.send(unverified));
    ClientStats s = env.client.stats();
    CHECK(s.tls_handshakes == 3);
    CHECK(s.tls_resumed == 0);
    CHECK(s.tls_sessions == 0);
  }
}

TEST_CASE("client TLS checks the host name", "[http][client][tls]") {
  SelfSignedCert cert({"DNS:bmc.example"});
  auto opt = test_options();
  opt.tls_cert_file = cert.cert_file();
  opt.tls_key_file = cert.key_file();
  TestServer ts(opt, make_app());
  ClientEnv env;
  ClientRequest r;
  r.url = base(ts, "https") + "/info";
  r.ca_file = cert.cert_file();
  auto res = env.send(r);
  REQUIRE_FALSE(res);
  CHECK(res.error().code == Code::kUnavailable);
}


// The TLS stream (tls_client_stream.h): records, deadlines and failures.

ServerOptions tls_options(const SelfSignedCert& cert) {
  auto opt = test_options();
  opt.tls_cert_file = cert.cert_file();
  opt.tls_key_file = cert.key_file();
  return opt;
}

TEST_CASE("client TLS carries bodies of many records both ways, byte for byte", "[http][client][tls]") {
  SelfSignedCert cert;
  TestServer ts(tls_options(cert), make_app());
  ClientEnv env;
  ClientRequest r;
  r.verify_tls = false;
  r.timeout = 10s;
  // 1 MiB down: 64 records of 16 KiB, read a piece at a time.
  r.url = base(ts, "https") + "/bytes/1048576";
  auto down = env.send(r);
  REQUIRE(down);
  CHECK(down->body() == pattern(1048576));
  // 300 KiB up, over several writes of at most 64 KiB each, on the same
  // connection, then echoed back.
  r.method = bhttp::verb::post;
  r.url = base(ts, "https") + "/echo";
  r.content_type = "application/octet-stream";
  r.body = pattern(300 * 1024);
  auto up = env.send(r);
  REQUIRE(up);
  const std::string prefix = "POST /echo application/octet-stream  ";
  REQUIRE(up->body().size() == prefix.size() + 300 * 1024);
  CHECK(up->body().substr(0, prefix.size()) == prefix);
  CHECK(up->body().substr(prefix.size()) == pattern(300 * 1024));
  CHECK(env.client.stats().tls_handshakes == 1);
}

// A listener that reads what each connection sends first (the ClientHello),
// answers `reply`, ends its side and waits for the client to close, so the
// client reads every byte of the reply rather than a reset.
class Answering {
 public:
  explicit Answering(std::string reply)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), reply_(std::move(reply)) {
    thread_ = std::thread([this] {
      for (;;) {
        boost::system::error_code ec;
        tcp::socket s(io_);
        acceptor_.accept(s, ec);
        if (ec || stopping_) return;
        std::array<char, 4096> hello{};
        s.read_some(asio::buffer(hello), ec);
        asio::write(s, asio::buffer(reply_), ec);
        s.shutdown(tcp::socket::shutdown_send, ec);
        while (!ec) s.read_some(asio::buffer(hello), ec);
      }
    });
  }
  ~Answering() {
    stopping_ = true;
    boost::system::error_code ec;
    tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::string reply_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

TEST_CASE("client TLS against a server that does not speak it fails at once with OpenSSL's reason", "[http][client][tls]") {
  ClientEnv env;
  ClientRequest r;
  r.verify_tls = false;
  r.timeout = 5s;
  SECTION("plain HTTP in answer to the ClientHello") {
    Answering plain("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    r.url = "https://127.0.0.1:" + std::to_string(plain.port()) + "/";
    const auto start = std::chrono::steady_clock::now();
    auto res = env.send(r);
    REQUIRE_FALSE(res);
    CHECK(res.error().code == Code::kUnavailable);
    CHECK(res.error().message.find("tls handshake with https://127.0.0.1:") != std::string::npos);
    CHECK(res.error().message.find("wrong version number") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < 2s);
  }
  SECTION("a hostile peer: a record header claiming 65,535 bytes, or 1 MiB that is no record at all") {
    // The client reads at most one record's worth (17 KiB) at a time and
    // OpenSSL judges the header before the body: neither is buffered whole.
    for (const std::string& reply : {std::string("\x16\x03\x03\xff\xff") + std::string(4096, 'x'),
                                     std::string(1 << 20, 'A')}) {
      Answering hostile(reply);
      r.url = "https://127.0.0.1:" + std::to_string(hostile.port()) + "/";
      const auto start = std::chrono::steady_clock::now();
      auto res = env.send(r);
      REQUIRE_FALSE(res);
      CAPTURE(res.error().message);
      CHECK(res.error().code == Code::kUnavailable);
      CHECK(res.error().message.find("tls handshake with") != std::string::npos);
      CHECK(std::chrono::steady_clock::now() - start < 2s);
    }
  }
  SECTION("the connection closed before any answer") {
    Answering closing("");
    r.url = "https://127.0.0.1:" + std::to_string(closing.port()) + "/";
    auto res = env.send(r);
    REQUIRE_FALSE(res);
    CHECK(res.error().code == Code::kUnavailable);
    CHECK(res.error().message.find("tls handshake with") != std::string::npos);
  }
}

TEST_CASE("client replaces a pooled TLS connection the server closed", "[http][client][tls]") {
  SelfSignedCert cert;
  auto opt = tls_options(cert);
  opt.idle_timeout = 1s;
  TestServer ts(opt, make_app());
  ClientEnv env;
  ClientRequest r;
  r.url = base(ts, "https") + "/info";
  r.verify_tls = false;
  auto a = env.send(r);
  REQUIRE(a);
  REQUIRE(testing::eventually([&] { return ts.server().connection_count() == 0; }, 3s));
  auto b = env.send(r);
  REQUIRE(b);
  CHECK(b->result_int() == 200);
  CHECK(b->body() != a->body());
  const ClientStats s = env.client.stats();
  CHECK(s.tls_handshakes == 2);
  CHECK(s.tls_resumed == 1);  // the closed connection's session lived on
}

}  // namespace
}  // namespace kiln::http
