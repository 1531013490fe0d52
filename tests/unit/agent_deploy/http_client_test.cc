// The agent's blocking HTTP client: framing, errors as values, deadlines.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent/net/http_client.h"
#include "tests/unit/agent_deploy/scripted_http_server.h"

using kiln::agent::HttpClient;
using kiln::agent::Url;

TEST_CASE("Url::parse accepts http and https URLs and refuses others", "[http_client]") {
  auto u = Url::parse("http://10.77.0.1:8080/v1/agent/lookup?x=1");
  REQUIRE(u);
  CHECK(u->host == "10.77.0.1");
  CHECK(u->port == 8080);
  CHECK(u->path == "/v1/agent/lookup?x=1");
  CHECK(u->authority() == "10.77.0.1:8080");
  auto bare = Url::parse("http://kilnd");
  REQUIRE(bare);
  CHECK(bare->port == 80);
  CHECK(bare->path == "/");
  auto v6 = Url::parse("http://[fd00::1]:81/x");
  REQUIRE(v6);
  CHECK(v6->host == "fd00::1");
  CHECK(v6->authority() == "[fd00::1]:81");
  auto tls = Url::parse("https://kilnd/x");
  REQUIRE(tls);
  CHECK(tls->tls);
  CHECK(tls->port == 443);
  CHECK(tls->authority() == "kilnd");
  CHECK_FALSE(bare->tls);
  CHECK_FALSE(Url::parse("ftp://kilnd/"));
  CHECK_FALSE(Url::parse("http://host:99999/"));
  CHECK_FALSE(Url::parse("http:///path"));
}

TEST_CASE("request sends the body and reads Content-Length, chunked and 204 replies", "[http_client]") {
  int call = 0;
  kiln::test::ScriptedHttpServer server([&](const kiln::test::ScriptedRequest& req) {
    kiln::test::ScriptedResponse r;
    r.headers.emplace_back("X-Echo-Method", req.method);
    if (call++ == 1) r.chunked = true;
    if (call == 3) r.status = 204;
    else r.body = req.body + "|" + std::string(2500, 'z');
    return r;
  });
  HttpClient c;
  for (int i = 0; i < 3; ++i) {
    auto r = c.request("POST", server.url("/echo"), {{"Content-Type", "application/json"}}, "{\"a\":1}");
    REQUIRE(r);
    if (i < 2) {
      CHECK(r->status == 200);
      CHECK(r->body == "{\"a\":1}|" + std::string(2500, 'z'));
      CHECK(r->header("x-echo-method") == "POST");
    } else {
      CHECK(r->status == 204);
      CHECK(r->body.empty());
    }
  }
  const auto reqs = server.requests();
  CHECK(reqs[0].header("Content-Type") == "application/json");
  CHECK(reqs[0].header("Host") == "127.0.0.1:" + std::to_string(server.port()));
}

TEST_CASE("a refused connection and a silent server are errors, not hangs", "[http_client]") {
  // A port with nothing listening: bind, note the port, close.
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(s);
  HttpClient c;
  auto refused = c.request("GET", "http://127.0.0.1:" + std::to_string(port) + "/");
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == kiln::Code::kUnavailable);

  // Listening but never answering: the kernel completes the handshake, the read times out.
  const int l = ::socket(AF_INET, SOCK_STREAM, 0);
  a.sin_port = 0;
  REQUIRE(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(l, 4) == 0);
  ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  kiln::agent::HttpClientOptions o;
  o.io_timeout = std::chrono::milliseconds(200);
  auto silent = HttpClient(o).request("GET", "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/");
  ::close(l);
  REQUIRE_FALSE(silent);
  CHECK(silent.error().code == kiln::Code::kTimeout);
}

TEST_CASE("a body cut short is reported with how much arrived", "[http_client]") {
  kiln::test::ScriptedHttpServer server([](const kiln::test::ScriptedRequest&) {
    kiln::test::ScriptedResponse r;
    r.body = std::string(10000, 'x');
    r.drop_after = 4000;
    return r;
  });
  std::size_t got = 0;
  auto s = HttpClient().stream("GET", server.url("/"), {}, {},
                               [](const kiln::agent::HttpResponseHead& h) {
                                 CHECK(h.status == 200);
                                 return kiln::ok_status();
                               },
                               [&](const char*, std::size_t n) {
                                 got += n;
                                 return kiln::ok_status();
                               });
  REQUIRE_FALSE(s);
  CHECK(got == 4000);
  CHECK(s.error().message == "connection closed after 4000 of 10000 body bytes");
}

TEST_CASE("a pin allows only https, no pin only http: the other kind is refused before connecting", "[http_client]") {
  kiln::agent::HttpClientOptions pinned;
  pinned.tls_sha256 = std::string(64, 'a');
  // Port 9 (discard) on loopback: nothing is connected to, the URL is refused first.
  auto plain = HttpClient(pinned).request("GET", "http://127.0.0.1:9/");
  REQUIRE_FALSE(plain);
  CHECK(plain.error().code == kiln::Code::kInvalidArgument);
  CHECK_THAT(plain.error().message, Catch::Contains("pinned"));
  auto unpinned = HttpClient().request("GET", "https://127.0.0.1:9/");
  REQUIRE_FALSE(unpinned);
  CHECK(unpinned.error().code == kiln::Code::kInvalidArgument);
  CHECK_THAT(unpinned.error().message, Catch::Contains("pin"));
}
