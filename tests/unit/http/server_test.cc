// HttpServer against a real socket: every test binds 127.0.0.1:0 and talks
// HTTP/1.1 through kiln::testing::HttpTestClient or raw bytes.

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/http/server.h"
#include "tests/support/http_test_client.h"
#include "tests/support/self_signed_cert.h"
#include "tests/unit/http/test_server.h"

namespace kiln::http {
namespace {

using kiln::testing::HttpTestClient;
using kiln::testing::SelfSignedCert;
using testing::eventually;
using testing::TestServer;
using testing::test_options;
using namespace std::chrono_literals;

Reply text(bhttp::status status, std::string body) {
  Reply r;
  r.response.result(status);
  r.response.set(bhttp::field::content_type, "text/plain");
  r.response.body() = std::move(body);
  return r;
}

// Query value of `key` in `target` ("" when absent); enough for these tests.
std::string query(std::string_view target, std::string_view key) {
  const std::string needle = std::string(key) + "=";
  auto pos = target.find(needle);
  if (pos == std::string_view::npos) return {};
  auto end = target.find('&', pos);
  return std::string(target.substr(pos + needle.size(), end == std::string_view::npos
                                                            ? std::string_view::npos
                                                            : end - pos - needle.size()));
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// What the routes below observed.
struct Observed {
  std::atomic<int> calls{0};
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};
  std::atomic<int> stream_writes{0};
  std::atomic<bool> stream_saw_peer_gone{false};
  std::atomic<bool> stream_finished{false};
};

// A small application: the routes every test uses.
Handler make_app(Observed& seen) {
  return [&seen](Request& req, const RequestInfo& info) -> asio::awaitable<Reply> {
    ++seen.calls;
    const std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    if (path == "/hello") co_return text(bhttp::status::ok, "hello");
    if (path == "/echo" && req.method() == bhttp::verb::post) {
      co_return text(bhttp::status::created, req.body());
    }
    if (path == "/id") co_return text(bhttp::status::ok, info.request_id);
    if (path == "/info") {
      co_return text(bhttp::status::ok, info.remote + (info.tls ? " tls" : " plain"));
    }
    if (path == "/throw") throw std::runtime_error("boom");
    if (path == "/slow") {
      const int now = ++seen.in_flight;
      int prev = seen.max_in_flight.load();
      while (now > prev && !seen.max_in_flight.compare_exchange_weak(prev, now)) {
      }
      co_await sleep_for(std::chrono::milliseconds(std::stoi(query(target, "ms"))));
      --seen.in_flight;
      co_return text(bhttp::status::ok, "slept");
    }
    if (path == "/stream") {
      // n=0: until the peer goes away.
      const int n = std::stoi(query(target, "n"));
      Reply r;
      r.response.result(bhttp::status::ok);
      r.response.set(bhttp::field::content_type, "text/event-stream");
      r.stream = [&seen, n](StreamWriter& w) -> asio::awaitable<void> {
        for (int i = 0; n == 0 || i < n; ++i) {
          if (!co_await w.write("data: " + std::to_string(i) + "\n\n")) {
            seen.stream_saw_peer_gone = true;
            break;
          }
          ++seen.stream_writes;
          co_await sleep_for(10ms);
        }
        seen.stream_finished = true;
      };
      co_return r;
    }
    co_return text(bhttp::status::not_found, "no route");
  };
}

TEST_CASE("GET and POST round trip with one log line per request", "[http][server]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());

  auto r = c.request("GET", "/hello?secret=query", "", {{"Authorization", "Bearer s3cr3t"}});
  CHECK(r.status == 200);
  CHECK(r.body == "hello");
  CHECK(r.header("content-length") == "5");
  CHECK(r.keep_alive);

  auto p = c.request("POST", "/echo", R"({"a":1})");
  CHECK(p.status == 201);
  CHECK(p.body == R"({"a":1})");

  auto missing = c.request("GET", "/nope");
  CHECK(missing.status == 404);

  // The line is written once the response is out, so it may trail the reply.
  CHECK(eventually([&] {
    return ts.log().find({"method=GET", "path=/nope", "status=404"}).size() == 1;
  }));
  auto lines = ts.log().find({"method=GET", "path=/hello ", "status=200", "duration_ms=",
                              "request_id=", "remote=127.0.0.1:"});
  CHECK(lines.size() == 1);
  CHECK(ts.log().find({"method=POST", "path=/echo", "status=201"}).size() == 1);
  for (const auto& l : ts.log().lines()) {
    CHECK(l.find("s3cr3t") == std::string::npos);  // never headers
    CHECK(l.find("secret=query") == std::string::npos);  // path only, no query
    CHECK(l.find("\"a\"") == std::string::npos);  // never bodies
  }
}

TEST_CASE("at the default level a request answered in full writes no log line", "[http][server]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen), 2, LogLevel::kInfo);
  HttpTestClient c("127.0.0.1", ts.port());
  for (int i = 0; i < 20; ++i) REQUIRE(c.request("GET", "/hello").status == 200);
  REQUIRE(c.request("GET", "/nope").status == 404);  // answered in full too: the handler logs refusals
  c.close();
  // A debug server writes one line per request (the test above); give this
  // one the same time to write any, then read what it wrote.
  std::this_thread::sleep_for(100ms);
  CHECK(ts.log().find({"http request"}).empty());
}

TEST_CASE("a shared body is sent in place of the response's own", "[http][server]") {
  auto shared = std::make_shared<const std::string>(std::string(200000, 'k') + "end");
  TestServer ts(test_options(), [shared](Request&, const RequestInfo&) -> asio::awaitable<Reply> {
    Reply r = text(bhttp::status::ok, "ignored");
    r.shared_body = shared;
    co_return r;
  });
  HttpTestClient c("127.0.0.1", ts.port());
  for (int i = 0; i < 3; ++i) {  // one kept-alive connection: each body framed exactly
    auto r = c.request("GET", "/kept");
    REQUIRE(r.status == 200);
    CHECK(r.body == *shared);
    CHECK(r.header("content-length") == std::to_string(shared->size()));
    CHECK(r.header("content-type") == "text/plain");
  }
}

TEST_CASE("keep-alive serves several requests on one connection", "[http][server]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());
  auto a = c.request("GET", "/info");
  auto b = c.request("GET", "/info");
  CHECK(a.status == 200);
  CHECK(b.status == 200);
  CHECK(a.body == b.body);  // same peer ip:port
  CHECK(c.connect_count() == 1);
  CHECK(ts.server().connection_count() == 1);

  // Connection: close is honoured.
  auto last = c.request("GET", "/hello", "", {{"Connection", "close"}});
  CHECK(last.status == 200);
  CHECK_FALSE(last.keep_alive);
  CHECK(eventually([&] { return ts.server().connection_count() == 0; }));
}

TEST_CASE("oversized bodies get 413 before the handler runs", "[http][server]") {
  Observed seen;
  auto opt = test_options();
  opt.body_limit = 1024;
  TestServer ts(opt, make_app(seen));

  SECTION("declared length over the limit, body never sent") {
    HttpTestClient c("127.0.0.1", ts.port());
    c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n");
    auto r = c.read_response();
    CHECK(r.status == 413);
    CHECK(r.body.find("\"status\":413") != std::string::npos);  // from the ErrorResponder
    CHECK_FALSE(r.keep_alive);
    CHECK(r.header("x-request-id").size() > 0);
  }
  SECTION("declared length over the limit, body sent") {
    HttpTestClient c("127.0.0.1", ts.port());
    auto r = c.request("POST", "/echo", std::string(4096, 'x'));
    CHECK(r.status == 413);
  }
  SECTION("chunked body growing over the limit") {
    HttpTestClient c("127.0.0.1", ts.port());
    std::string chunk(800, 'y');
    c.send_raw("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    c.send_raw("320\r\n" + chunk + "\r\n320\r\n" + chunk + "\r\n0\r\n\r\n");
    auto r = c.read_response();
    CHECK(r.status == 413);
  }
  SECTION("a body at the limit is fine") {
    HttpTestClient c("127.0.0.1", ts.port());
    auto r = c.request("POST", "/echo", std::string(1024, 'z'));
    CHECK(r.status == 201);
    CHECK(r.body.size() == 1024);
  }
  CHECK(seen.calls.load() <= 1);
}

TEST_CASE("oversized headers are rejected with 431", "[http][server]") {
  Observed seen;
  auto opt = test_options();
  opt.header_limit = 1024;
  TestServer ts(opt, make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());
  auto r = c.request("GET", "/hello", "", {{"X-Big", std::string(4096, 'h')}});
  CHECK(r.status == 431);
  CHECK_FALSE(r.keep_alive);
  CHECK(seen.calls == 0);
  // Headers under the limit pass.
  auto ok = c.request("GET", "/hello", "", {{"X-Small", std::string(100, 'h')}});
  CHECK(ok.status == 200);
}

TEST_CASE("malformed requests get 400 and the connection is closed", "[http][server]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());
  c.send_raw("this is not http\r\n\r\n");
  auto r = c.read_response();
  CHECK(r.status == 400);
  CHECK_FALSE(r.keep_alive);
  CHECK_FALSE(c.connected());
  CHECK(seen.calls == 0);
  CHECK(eventually([&] { return ts.log().find({"status=400"}).size() == 1; }));
}

TEST_CASE("read deadline closes a slow-loris connection", "[http][server]") {
  Observed seen;
  auto opt = test_options();
  opt.read_timeout = 1s;
  TestServer ts(opt, make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());

  const auto start = std::chrono::steady_clock::now();
  c.send_raw("GET /hello HTTP/1.1\r\nHost: x\r\n");
  // Keep trickling header lines: the deadline is per request, not per read.
  for (int i = 0; i < 15; ++i) {
    std::this_thread::sleep_for(150ms);
    try {
      c.send_raw("X-Drip: " + std::to_string(i) + "\r\n");
    } catch (const std::exception&) {
      break;  // the server already closed
    }
  }
  CHECK(c.wait_closed(3s));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= 900ms);
  CHECK(elapsed < 2500ms);
  CHECK(seen.calls == 0);
  CHECK(eventually([&] { return ts.server().connection_count() == 0; }));
}

TEST_CASE("idle keep-alive connections are closed after idle_timeout", "[http][server]") {
  Observed seen;
  auto opt = test_options();
  opt.idle_timeout = 1s;
  TestServer ts(opt, make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());
  CHECK(c.request("GET", "/hello").status == 200);
  const auto start = std::chrono::steady_clock::now();
  CHECK(c.wait_closed(3s));
  CHECK(std::chrono::steady_clock::now() - start >= 900ms);
}

// The test client (tests/support/http_test_client) as suites use it across long waits:
// a GET on a connection the server closed while idle goes out again on a new one.
TEST_CASE("the test client resends an idempotent request once when its kept-alive connection was closed idle",
          "[http][server]") {
  Observed seen;
  auto opt = test_options();
  opt.idle_timeout = 1s;
  TestServer ts(opt, make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());
  CHECK(c.request("GET", "/hello").status == 200);
  CHECK(eventually([&] { return ts.server().connection_count() == 0; }));  // closed by the server
  CHECK(c.connected());  // as far as the client knows until it uses it
  CHECK(c.request("GET", "/hello").status == 200);
  CHECK(c.connect_count() == 2);
  CHECK(seen.calls == 2);  // the handler ran once per answer, not for the lost attempt
}

TEST_CASE("many concurrent connections are served concurrently", "[http][server]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen), /*threads=*/2);
  constexpr int kClients = 50;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&] {
      try {
        HttpTestClient c("127.0.0.1", ts.port());
        for (int j = 0; j < 3; ++j) {
          if (c.request("GET", "/slow?ms=50").status == 200) ++ok;
        }
      } catch (const std::exception&) {
      }
    });
  }
  for (auto& t : clients) t.join();
  CHECK(ok == kClients * 3);
  CHECK(seen.max_in_flight > 1);
}

TEST_CASE("connections beyond max_connections get 503", "[http][server]") {
  Observed seen;
  auto opt = test_options();
  opt.max_connections = 2;
  TestServer ts(opt, make_app(seen));
  HttpTestClient a("127.0.0.1", ts.port());
  HttpTestClient b("127.0.0.1", ts.port());
  CHECK(a.request("GET", "/hello").status == 200);
  CHECK(b.request("GET", "/hello").status == 200);
  CHECK(ts.server().connection_count() == 2);

  HttpTestClient c("127.0.0.1", ts.port());
  auto r = c.request("GET", "/hello");
  CHECK(r.status == 503);
  CHECK(r.body.find("\"status\":503") != std::string::npos);
  CHECK_FALSE(r.keep_alive);

  a.close();
  REQUIRE(eventually([&] { return ts.server().connection_count() == 1; }));
  CHECK(c.request("GET", "/hello").status == 200);
}

TEST_CASE("a handler exception becomes a 500 from the ErrorResponder", "[http][server]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());
  auto r = c.request("GET", "/throw");
  CHECK(r.status == 500);
  CHECK(r.body.find("\"status\":500") != std::string::npos);
  CHECK(r.body.find("boom") == std::string::npos);  // no internals to the client
  CHECK(eventually([&] { return ts.log().find({"handler threw", "boom"}).size() == 1; }));
  // The connection survives.
  CHECK(c.request("GET", "/hello").status == 200);
  CHECK(c.connect_count() == 1);
}

TEST_CASE("request ids are echoed when sane and generated otherwise", "[http][server]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());

  auto given = c.request("GET", "/id", "", {{"X-Request-Id", "req-42_A.b"}});
  CHECK(given.header("x-request-id") == "req-42_A.b");
  CHECK(given.body == "req-42_A.b");
  CHECK(eventually([&] { return ts.log().find({"request_id=req-42_A.b"}).size() == 1; }));

  auto generated = c.request("GET", "/id");
  CHECK(generated.header("x-request-id").size() >= 16);
  CHECK(generated.body == generated.header("x-request-id"));

  for (std::string bad : {std::string("has space"), std::string(65, 'a'), std::string("semi;colon")}) {
    auto r = c.request("GET", "/id", "", {{"X-Request-Id", bad}});
    CHECK(r.header("x-request-id") != bad);
    CHECK(r.header("x-request-id").size() >= 16);
  }
  auto other = c.request("GET", "/id");
  CHECK(other.body != generated.body);
}

TEST_CASE("HTTPS with a self-signed certificate", "[http][server][tls]") {
  SelfSignedCert cert;
  Observed seen;
  auto opt = test_options();
  opt.tls_cert_file = cert.cert_file();
  opt.tls_key_file = cert.key_file();
  TestServer ts(opt, make_app(seen));
  CHECK(ts.server().tls());
  HttpTestClient c("127.0.0.1", ts.port(), /*tls=*/true);
  auto r = c.request("GET", "/info");
  CHECK(r.status == 200);
  CHECK(r.body.find(" tls") != std::string::npos);
  CHECK(c.request("POST", "/echo", "over tls").body == "over tls");
  CHECK(c.connect_count() == 1);

  // A plain-HTTP client gets nothing useful from a TLS port.
  HttpTestClient plain("127.0.0.1", ts.port(), /*tls=*/false, 2s);
  CHECK_THROWS(plain.request("GET", "/hello"));
  CHECK(seen.calls == 2);
}

TEST_CASE("start reports bad TLS material and a taken port", "[http][server]") {
  asio::io_context io;
  Logger quiet(LogLevel::kOff);
  auto opt = test_options();
  opt.tls_cert_file = "/nonexistent/cert.pem";
  opt.tls_key_file = "/nonexistent/key.pem";
  Observed seen;
  HttpServer bad_tls(io, opt, make_app(seen), testing::test_error_responder, quiet);
  auto st = bad_tls.start();
  REQUIRE_FALSE(st);
  CHECK(st.error().code == Code::kInvalidArgument);

  HttpServer first(io, test_options(), make_app(seen), testing::test_error_responder, quiet);
  REQUIRE(first.start());
  auto taken = test_options();
  taken.port = first.port();
  HttpServer second(io, taken, make_app(seen), testing::test_error_responder, quiet);
  auto st2 = second.start();
  REQUIRE_FALSE(st2);
  CHECK(st2.error().code == Code::kUnavailable);
  first.stop();
  io.run();  // must return: stop() leaves no work behind
}

TEST_CASE("a streaming reply sends chunks in order", "[http][server][stream]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());
  auto s = c.read_sse("/stream?n=5", 10, 5s);
  CHECK(s.status == 200);
  CHECK(s.headers["transfer-encoding"] == "chunked");
  CHECK(s.headers["content-type"] == "text/event-stream");
  CHECK(s.headers.count("x-request-id") == 1);
  REQUIRE(s.events.size() == 5);
  for (int i = 0; i < 5; ++i) CHECK(s.events[i] == "data: " + std::to_string(i));
  CHECK(s.ended);
  // The body ended cleanly, so the connection is still good for more.
  CHECK(c.request("GET", "/hello").status == 200);
  CHECK(c.connect_count() == 1);
}

TEST_CASE("a streaming reply ends when the client goes away", "[http][server][stream]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen));
  HttpTestClient c("127.0.0.1", ts.port());
  auto s = c.read_sse("/stream?n=0", 3, 5s);
  REQUIRE(s.events.size() >= 3);
  CHECK(s.events[2] == "data: 2");
  CHECK_FALSE(s.ended);
  c.close();
  CHECK(eventually([&] { return seen.stream_finished.load(); }));
  CHECK(seen.stream_saw_peer_gone);
  CHECK(eventually([&] { return ts.server().connection_count() == 0; }));
  CHECK(eventually([&] {
    return ts.log().find({"path=/stream", "outcome=\"peer gone\""}).size() == 1;
  }));
}

TEST_CASE("stop closes live connections and io.run() returns", "[http][server]") {
  Observed seen;
  TestServer ts(test_options(), make_app(seen));
  const uint16_t port = ts.port();

  HttpTestClient idle("127.0.0.1", port);
  CHECK(idle.request("GET", "/hello").status == 200);
  // One request in flight during stop, one endless stream.
  std::thread slow([port] {
    HttpTestClient c("127.0.0.1", port, false, 5s);
    try {
      c.request("GET", "/slow?ms=300");
    } catch (const std::exception&) {
    }
  });
  std::thread stream([port] {
    HttpTestClient c("127.0.0.1", port, false, 5s);
    try {
      c.read_sse("/stream?n=0", 1000000, 5s);
    } catch (const std::exception&) {
    }
  });
  REQUIRE(eventually([&] { return seen.in_flight == 1 && seen.stream_writes > 0; }));
  CHECK(ts.server().connection_count() == 3);

  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] { ts.server().stop(); });  // from a foreign thread
  stopper.join();
  CHECK(ts.shutdown(3s));
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  slow.join();
  stream.join();
  CHECK(idle.wait_closed(1s));
  CHECK(seen.stream_finished);

  HttpTestClient late("127.0.0.1", port, false, 1s);
  CHECK_THROWS(late.request("GET", "/hello"));
}

}  // namespace
}  // namespace kiln::http
