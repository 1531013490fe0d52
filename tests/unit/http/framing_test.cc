// Request framing (RFC 9112 section 6) against a real HttpServer on
// 127.0.0.1:0, spoken to through a raw socket so the test sees exactly what
// the server sends and when it closes. Each refused Transfer-Encoding variant
// must get one 400, never reach the handler, and end with the server closing
// the connection (a read returns EOF) — a server that guessed the body length
// instead would answer the request and then parse its body as a second one.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <string>
#include <vector>

#include "common/http/request_framing.h"
#include "common/http/server.h"
#include "tests/unit/http/test_server.h"

namespace kiln::http {
namespace {

using testing::TestServer;
using testing::test_options;

// What a raw connection saw: every byte the server sent, and whether the
// server closed the connection (EOF) before the deadline.
struct RawExchange {
  std::string received;
  bool closed = false;
};

// Connects to 127.0.0.1:port, writes `bytes` (without half-closing, so only
// the server can end the connection) and reads until EOF or `timeout`.
RawExchange raw_exchange(uint16_t port, const std::string& bytes,
                         std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  REQUIRE(::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server may close early; what it sent is still read below
    sent += static_cast<std::size_t>(n);
  }
  RawExchange out;
  char buf[4096];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      out.closed = true;
      break;
    }
    if (n < 0) {
      // A reset after the server's reply also ends the connection; a timeout does not.
      out.closed = errno == ECONNRESET;
      break;
    }
    out.received.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

// The status codes of every complete response in `wire`, in order, read
// with Beast's response parser (a status line inside a body is not one).
std::vector<int> statuses(const std::string& wire) {
  std::vector<int> out;
  std::string_view rest = wire;
  while (!rest.empty()) {
    bhttp::response_parser<bhttp::string_body> parser;
    parser.eager(true);
    beast::error_code ec;
    const std::size_t used = parser.put(asio::buffer(rest.data(), rest.size()), ec);
    if (ec || !parser.is_done()) break;
    out.push_back(static_cast<int>(parser.get().result_int()));
    rest.remove_prefix(used);
  }
  return out;
}

Handler counting_echo(std::atomic<int>& calls) {
  return [&calls](Request& req, const RequestInfo&) -> asio::awaitable<Reply> {
    ++calls;
    Reply r;
    r.response.result(bhttp::status::created);
    r.response.set(bhttp::field::content_type, "text/plain");
    r.response.body() = std::string(req.target()) + " " + req.body();
    co_return r;
  };
}

const std::string kChunkedBody = "5\r\nhello\r\n0\r\n\r\n";

struct Variant {
  const char* name;
  std::string head;  // request line and header fields, without the blank line
};

// Every framing the server must refuse. The body sent after each is a valid
// chunked body, so a server that framed the request any other way would
// either answer it (a 201) or parse the body as a second request.
std::vector<Variant> refused_variants() {
  const std::string post = "POST /echo HTTP/1.1\r\nHost: x\r\n";
  return {
      {"xchunked", post + "Transfer-Encoding: xchunked\r\n"},
      {"gzip", post + "Transfer-Encoding: gzip\r\n"},
      {"identity", post + "Transfer-Encoding: identity\r\n"},
      {"chunked, identity", post + "Transfer-Encoding: chunked, identity\r\n"},
      {"gzip, chunked (a coding the server does not implement)", post + "Transfer-Encoding: gzip, chunked\r\n"},
      {"chunked, chunked", post + "Transfer-Encoding: chunked, chunked\r\n"},
      {"chunked with a parameter", post + "Transfer-Encoding: chunked;q=1\r\n"},
      {"quoted chunked", post + "Transfer-Encoding: \"chunked\"\r\n"},
      {"empty value", post + "Transfer-Encoding: \r\n"},
      {"only commas", post + "Transfer-Encoding: , ,\r\n"},
      {"two lines, gzip then chunked", post + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"},
      {"two lines, identity then chunked",
       post + "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n"},
      {"two lines, chunked twice", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"},
      {"two lines, chunked then gzip", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n"},
      {"obs-fold adding a coding", post + "Transfer-Encoding: chunked\r\n , identity\r\n"},
      {"obs-fold between gzip and chunked", post + "Transfer-Encoding: gzip,\r\n\tchunked\r\n"},
      {"obs-fold without a comma", post + "Transfer-Encoding: chunked\r\n gzip\r\n"},
      {"gzip with Content-Length", post + "Transfer-Encoding: gzip\r\nContent-Length: 15\r\n"},
      {"chunked with Content-Length after", post + "Transfer-Encoding: chunked\r\nContent-Length: 15\r\n"},
      {"Content-Length then chunked", post + "Content-Length: 15\r\nTransfer-Encoding: chunked\r\n"},
      {"HTTP/1.0 with chunked", "POST /echo HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"},
      {"HTTP/1.0 with gzip and Content-Length",
       "POST /echo HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: gzip\r\nContent-Length: 15\r\n"},
      {"whitespace before the colon", post + "Transfer-Encoding : chunked\r\n"},
  };
}

TEST_CASE("a Transfer-Encoding the server cannot frame gets 400 and the connection is closed",
          "[http][server][framing]") {
  for (const Variant& v : refused_variants()) {
    DYNAMIC_SECTION(v.name) {
      std::atomic<int> calls{0};
      TestServer ts(test_options(), counting_echo(calls));
      const RawExchange ex = raw_exchange(ts.port(), v.head + "\r\n" + kChunkedBody);
      INFO(ex.received);
      CHECK(statuses(ex.received) == std::vector<int>{400});
      CHECK(ex.received.find("Connection: close") != std::string::npos);
      CHECK(ex.closed);
      CHECK(calls.load() == 0);
    }
  }
}

TEST_CASE("a body that Beast would take for the next request is never served as one",
          "[http][server][framing]") {
  // The classic desync: with `xchunked` Beast 1.74 frames the POST as having
  // no body, and the bytes after the header become a GET of their own.
  std::atomic<int> calls{0};
  TestServer ts(test_options(), counting_echo(calls));
  const RawExchange ex = raw_exchange(
      ts.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n"
                 "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n");
  INFO(ex.received);
  CHECK(statuses(ex.received) == std::vector<int>{400});
  CHECK(ex.received.find("/smuggled") == std::string::npos);
  CHECK(ex.closed);
  CHECK(calls.load() == 0);
}

TEST_CASE("a correctly chunked request is still read and the connection kept",
          "[http][server][framing]") {
  std::atomic<int> calls{0};
  TestServer ts(test_options(), counting_echo(calls));
  // Coding names are case-insensitive; whitespace around the value and empty
  // list elements are not codings; an obs-fold before the only coding is a
  // space. Each request is followed by a plain GET on the same connection,
  // which must be answered too, and then `Connection: close` ends it.
  const std::vector<Variant> accepted = {
      {"chunked", "Transfer-Encoding: chunked\r\n"},
      {"Chunked", "Transfer-Encoding: Chunked\r\n"},
      {"CHUNKED", "Transfer-Encoding: CHUNKED\r\n"},
      {"spaces around", "Transfer-Encoding:  chunked \r\n"},
      {"tabs around", "Transfer-Encoding:\tchunked\t\r\n"},
      {"empty list elements", "Transfer-Encoding: , chunked,\r\n"},
      {"obs-fold before the value", "Transfer-Encoding:\r\n chunked\r\n"},
  };
  for (const Variant& v : accepted) {
    DYNAMIC_SECTION(v.name) {
      const RawExchange ex = raw_exchange(
          ts.port(), "POST /echo HTTP/1.1\r\nHost: x\r\n" + v.head + "\r\n" + kChunkedBody +
                         "GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
      INFO(ex.received);
      CHECK(statuses(ex.received) == std::vector<int>{201, 201});
      CHECK(ex.received.find("/echo hello") != std::string::npos);
      CHECK(ex.received.find("/after ") != std::string::npos);
      CHECK(ex.closed);
    }
  }
}

TEST_CASE("check_request_framing names Transfer-Encoding and never echoes the request",
          "[http][framing]") {
  auto header = [](std::vector<std::string> te, unsigned version = 11) {
    RequestHeader h;
    h.version(version);
    h.method(bhttp::verb::post);
    h.target("/");
    for (const std::string& v : te) h.insert(bhttp::field::transfer_encoding, v);
    return h;
  };
  CHECK(check_request_framing(header({})));
  CHECK(check_request_framing(header({"chunked"})));
  CHECK(check_request_framing(header({"", "chunked"})));  // an empty line adds no coding
  RequestHeader no_te_with_length = header({});
  no_te_with_length.set(bhttp::field::content_length, "3");
  CHECK(check_request_framing(no_te_with_length));

  Status s = check_request_framing(header({"<script>chunked"}));
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kInvalidArgument);
  CHECK(s.error().fields.at(0).field == "Transfer-Encoding");
  CHECK(s.error().message.find("<script>") == std::string::npos);
  CHECK(check_request_framing(header({"gzip", "chunked"})).error().message ==
        "Transfer-Encoding: only a single chunked transfer coding is implemented");
  CHECK(check_request_framing(header({"chunked", "gzip"})).error().message ==
        "Transfer-Encoding: the final transfer coding must be chunked");
  CHECK(check_request_framing(header({"chunked"}, 10)).error().message ==
        "Transfer-Encoding: not allowed in an HTTP/1.0 request");
  RequestHeader with_length = header({"chunked"});
  with_length.set(bhttp::field::content_length, "3");
  CHECK(check_request_framing(with_length).error().message ==
        "Transfer-Encoding: not allowed together with Content-Length");
}

}  // namespace
}  // namespace kiln::http
