#include "agent/net/http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <strings.h>

#include "common/crypto.h"

namespace kiln::agent {

namespace {

constexpr std::size_t kMaxHeaderBytes = 64 * 1024;
constexpr std::size_t kMaxDelivery = 1024 * 1024;

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string find_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

std::string errno_text(int e) { return std::strerror(e); }

// One TCP connection with a read buffer and per-operation deadlines.
// The last OpenSSL error as text ("" when the queue is empty).
std::string ssl_error_text() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// One TCP connection (TLS when start_tls() succeeded) with a read buffer and
// per-operation deadlines.
class Connection {
 public:
  Connection(int fd, std::chrono::milliseconds io_timeout) : fd_(fd), io_timeout_(io_timeout) {}
  ~Connection() {
    // No close_notify: every request is Connection: close and bodies are
    // framed, so a truncation is still detected.
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
    if (fd_ >= 0) ::close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // TLS handshake, then the pin: the server's leaf certificate (DER) must
  // hash to `pin_sha256`. There is no CA store in the ramdisk and kilnd's
  // certificate is often self-signed, so the pin is the whole trust decision
  // (chain and name are not checked); nothing is sent before it holds.
  // kUnavailable for a failed handshake or a certificate that does not match.
  Status start_tls(const std::string& host, const std::string& pin_sha256) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    if (ctx_ == nullptr) return Error(Code::kInternal, "TLS: " + ssl_error_text());
    SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
    ssl_ = SSL_new(ctx_);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return Error(Code::kInternal, "TLS: " + ssl_error_text());
    // SNI only for names: RFC 6066 forbids IP literals there.
    if (host.find_first_not_of("0123456789.:abcdefABCDEF") != std::string::npos)
      SSL_set_tlsext_host_name(ssl_, host.c_str());
    for (;;) {
      const int r = SSL_connect(ssl_);
      if (r == 1) break;
      if (auto s = wait_ssl(r, "TLS handshake"); !s) return s;
    }
    X509* cert = SSL_get1_peer_certificate(ssl_);
    if (cert == nullptr) return Error(Code::kUnavailable, "TLS: the server sent no certificate");
    unsigned char* der = nullptr;
    const int len = i2d_X509(cert, &der);
    X509_free(cert);
    if (len <= 0) return Error(Code::kUnavailable, "TLS: the server's certificate cannot be encoded");
    const std::string got = sha256_hex(std::string_view(reinterpret_cast<const char*>(der), static_cast<std::size_t>(len)));
    OPENSSL_free(der);
    std::string want = pin_sha256;
    std::transform(want.begin(), want.end(), want.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!constant_time_equal(got, want))
      return Error(Code::kUnavailable, "TLS: the server's certificate (sha256 " + got + ") is not the pinned one");
    return ok_status();
  }

  Status write_all(std::string_view data) {
    while (!data.empty()) {
      if (ssl_ != nullptr) {
        const int n = SSL_write(ssl_, data.data(), static_cast<int>(std::min<std::size_t>(data.size(), 1 << 30)));
        if (n > 0) {
          data.remove_prefix(static_cast<std::size_t>(n));
          continue;
        }
        if (auto s = wait_ssl(n, "send"); !s) return s;
        continue;
      }
      if (auto w = wait(POLLOUT); !w) return w;
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return Error(Code::kUnavailable, "send: " + errno_text(errno));
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
    return ok_status();
  }

  // Reads more bytes into the buffer; kUnavailable on EOF.
  Status fill() {
    char tmp[64 * 1024];
    if (ssl_ != nullptr) {
      // No poll first: OpenSSL may already hold decrypted bytes.
      for (;;) {
        const int n = SSL_read(ssl_, tmp, sizeof tmp);
        if (n > 0) {
          buf_.append(tmp, static_cast<std::size_t>(n));
          return ok_status();
        }
        const int e = SSL_get_error(ssl_, n);
        if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) ||
            (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
          ERR_clear_error();
          eof_ = true;
          return Error(Code::kUnavailable, "connection closed by peer");
        }
        if (auto s = wait_ssl(n, "recv"); !s) return s;
      }
    }
    if (auto w = wait(POLLIN); !w) return w;
    for (;;) {
      const ssize_t n = ::recv(fd_, tmp, sizeof tmp, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          if (auto w = wait(POLLIN); !w) return w;
          continue;
        }
        return Error(Code::kUnavailable, "recv: " + errno_text(errno));
      }
      if (n == 0) {
        eof_ = true;
        return Error(Code::kUnavailable, "connection closed by peer");
      }
      buf_.append(tmp, static_cast<std::size_t>(n));
      return ok_status();
    }
  }

  // Reads one CRLF-terminated line (without the CRLF).
  Result<std::string> read_line(std::size_t limit) {
    for (;;) {
      const auto pos = buf_.find("\r\n", pos_);
      if (pos != std::string::npos) {
        std::string line = buf_.substr(pos_, pos - pos_);
        pos_ = pos + 2;
        compact();
        return line;
      }
      if (buf_.size() - pos_ > limit) return Error(Code::kUnavailable, "response line too long");
      if (auto s = fill(); !s) return s.take_error();
    }
  }

  std::size_t available() const { return buf_.size() - pos_; }
  const char* data() const { return buf_.data() + pos_; }
  void consume(std::size_t n) {
    pos_ += n;
    compact();
  }
  bool eof() const { return eof_; }

 private:
  // After an SSL call returned `r` <= 0: waits for the socket when OpenSSL
  // wants to read or write, else the error.
  Status wait_ssl(int r, const char* what) {
    const int e = SSL_get_error(ssl_, r);
    if (e == SSL_ERROR_WANT_READ) return wait(POLLIN);
    if (e == SSL_ERROR_WANT_WRITE) return wait(POLLOUT);
    std::string why = ssl_error_text();
    if (why.empty()) why = e == SSL_ERROR_SYSCALL ? errno_text(errno) : "SSL error " + std::to_string(e);
    return Error(Code::kUnavailable, std::string(what) + ": " + why);
  }
  Status wait(short events) {
    pollfd p{fd_, events, 0};
    for (;;) {
      const int r = ::poll(&p, 1, static_cast<int>(io_timeout_.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Error(Code::kUnavailable, "poll: " + errno_text(errno));
      if (r == 0) return Error(Code::kTimeout, "no data for " + std::to_string(io_timeout_.count()) + " ms");
      return ok_status();
    }
  }
  void compact() {
    if (pos_ > 256 * 1024 || pos_ == buf_.size()) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
  }

  int fd_;
  std::chrono::milliseconds io_timeout_;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string buf_;
  std::size_t pos_ = 0;
  bool eof_ = false;
};

// Connects to one address with a deadline (non-blocking connect + poll).
Result<int> connect_one(const addrinfo* ai, std::chrono::milliseconds timeout) {
  const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return Error(Code::kUnavailable, "socket: " + errno_text(errno));
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
    const int e = errno;
    ::close(fd);
    return Error(Code::kUnavailable, "connect: " + errno_text(e));
  }
  pollfd p{fd, POLLOUT, 0};
  int r;
  do r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  while (r < 0 && errno == EINTR);
  if (r == 0) {
    ::close(fd);
    return Error(Code::kTimeout, "connect: no answer in " + std::to_string(timeout.count()) + " ms");
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (r < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err != 0) {
    const int e = err ? err : errno;
    ::close(fd);
    return Error(Code::kUnavailable, "connect: " + errno_text(e));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Result<int> connect_to(const Url& url, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  // Numeric addresses first: the ramdisk has no NSS modules, and kilnd's URL
  // is normally an IP literal taken from the kernel command line or DHCP.
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(url.port);
  int rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res);
  if (rc == EAI_NONAME) {
    hints.ai_flags = AI_NUMERICSERV;
    rc = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &res);
  }
  if (rc != 0) return Error(Code::kUnavailable, "resolve " + url.host + ": " + gai_strerror(rc));
  Error last(Code::kUnavailable, "no address for " + url.host);
  for (const addrinfo* ai = res; ai; ai = ai->ai_next) {
    auto fd = connect_one(ai, timeout);
    if (fd) {
      ::freeaddrinfo(res);
      return fd;
    }
    last = fd.take_error();
  }
  ::freeaddrinfo(res);
  return last;
}

Result<std::uint64_t> parse_u64(std::string_view s, int base) {
  if (s.empty()) return Error(Code::kUnavailable, "empty number");
  std::uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return Error(Code::kUnavailable, "bad number '" + std::string(s) + "'");
    if (v > (UINT64_MAX - d) / base) return Error(Code::kUnavailable, "number too large");
    v = v * base + d;
  }
  return v;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Delivers up to `n` buffered-or-read bytes of the body to on_body.
Status deliver(Connection& c, std::uint64_t n, const std::function<Status(const char*, std::size_t)>& on_body,
               std::uint64_t* delivered) {
  while (n > 0) {
    if (c.available() == 0)
      if (auto s = c.fill(); !s) return s;
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>({n, c.available(), kMaxDelivery}));
    if (auto s = on_body(c.data(), take); !s) return s;
    c.consume(take);
    n -= take;
    *delivered += take;
  }
  return ok_status();
}

}  // namespace

Result<Url> Url::parse(std::string_view text) {
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  Url u;
  if (text.size() >= kHttps.size() && iequals(text.substr(0, kHttps.size()), kHttps)) {
    u.tls = true;
    u.port = 443;
    text.remove_prefix(kHttps.size());
  } else if (text.size() >= kHttp.size() && iequals(text.substr(0, kHttp.size()), kHttp)) {
    text.remove_prefix(kHttp.size());
  } else {
    return Error::invalid("url", "only http:// and https:// URLs are supported: '" + std::string(text) + "'");
  }
  const auto slash = text.find('/');
  std::string_view authority = text.substr(0, slash);
  u.path = slash == std::string_view::npos ? "/" : std::string(text.substr(slash));
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  if (authority.empty()) return Error::invalid("url", "no host in URL");
  std::string_view port;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return Error::invalid("url", "unterminated IPv6 literal");
    u.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return Error::invalid("url", "bad authority");
      port = authority.substr(close + 2);
    }
  } else {
    const auto colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return Error::invalid("url", "no host in URL");
  if (!port.empty()) {
    auto p = parse_u64(port, 10);
    if (!p || *p == 0 || *p > 65535) return Error::invalid("url", "bad port '" + std::string(port) + "'");
    u.port = static_cast<uint16_t>(*p);
  }
  return u;
}

std::string Url::authority() const {
  // Built with append: GCC 12 reports a false -Wrestrict for "[" + host at -O2.
  std::string out;
  const bool v6 = host.find(':') != std::string::npos;
  if (v6) out.push_back('[');
  out.append(host);
  if (v6) out.push_back(']');
  if (port != (tls ? 443 : 80)) out.append(":").append(std::to_string(port));
  return out;
}

std::string HttpResponseHead::header(std::string_view name) const { return find_header(headers, name); }
std::string HttpResponse::header(std::string_view name) const { return find_header(headers, name); }

Status HttpClient::stream(std::string_view method, std::string_view url_text, const HttpHeaders& headers,
                          std::string_view body, const std::function<Status(const HttpResponseHead&)>& on_head,
                          const std::function<Status(const char*, std::size_t)>& on_body) const {
  auto url = Url::parse(url_text);
  if (!url) return url.take_error();
  // With a pin, TLS to that certificate only; without one, plain HTTP only
  // (an https URL without a pin would have nothing to trust).
  if (url->tls && options_.tls_sha256.empty())
    return Error::invalid("url", "https:// needs kilnd's certificate pin (kiln.tls_sha256): '" + std::string(url_text) + "'");
  if (!url->tls && !options_.tls_sha256.empty())
    return Error::invalid("url", "plain http:// refused: kilnd's certificate is pinned: '" + std::string(url_text) + "'");
  auto fd = connect_to(*url, options_.connect_timeout);
  if (!fd) return fd.take_error();
  Connection c(*fd, options_.io_timeout);
  if (url->tls)
    if (auto s = c.start_tls(url->host, options_.tls_sha256); !s) return s;

  std::string req;
  req.reserve(256 + body.size());
  req.append(method).append(" ").append(url->path).append(" HTTP/1.1\r\n");
  req.append("Host: ").append(url->authority()).append("\r\n");
  req.append("Connection: close\r\nUser-Agent: kiln-agent\r\n");
  for (const auto& [k, v] : headers) req.append(k).append(": ").append(v).append("\r\n");
  if (!body.empty() || method == "POST" || method == "PUT")
    req.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  req.append("\r\n").append(body);
  if (auto s = c.write_all(req); !s) return s;

  // Status line and headers; 1xx interim responses are skipped.
  HttpResponseHead head;
  for (;;) {
    auto line = c.read_line(kMaxHeaderBytes);
    if (!line) return line.take_error();
    if (line->rfind("HTTP/1.", 0) != 0 || line->size() < 12)
      return Error(Code::kUnavailable, "malformed status line");
    auto code = parse_u64(std::string_view(*line).substr(9, 3), 10);
    if (!code) return Error(Code::kUnavailable, "malformed status line");
    head.status = static_cast<int>(*code);
    head.headers.clear();
    std::size_t total = 0;
    for (;;) {
      auto h = c.read_line(kMaxHeaderBytes);
      if (!h) return h.take_error();
      if (h->empty()) break;
      total += h->size();
      if (total > kMaxHeaderBytes) return Error(Code::kUnavailable, "response headers too large");
      const auto colon = h->find(':');
      if (colon == std::string::npos) return Error(Code::kUnavailable, "malformed header line");
      head.headers.emplace_back(std::string(trim(std::string_view(*h).substr(0, colon))),
                                std::string(trim(std::string_view(*h).substr(colon + 1))));
    }
    if (head.status >= 200 || head.status == 101) break;
  }
  if (auto s = on_head(head); !s) return s;

  const bool no_body = method == "HEAD" || head.status == 204 || head.status == 304;
  if (no_body) return ok_status();

  std::uint64_t delivered = 0;
  const std::string te = head.header("Transfer-Encoding");
  if (!te.empty() && te.find("chunked") != std::string::npos) {
    for (;;) {
      auto size_line = c.read_line(1024);
      if (!size_line) return size_line.take_error();
      std::string_view sv = *size_line;
      sv = trim(sv.substr(0, sv.find(';')));
      auto size = parse_u64(sv, 16);
      if (!size) return Error(Code::kUnavailable, "malformed chunk size");
      if (*size == 0) {
        // Trailers, then the final empty line.
        for (;;) {
          auto t = c.read_line(kMaxHeaderBytes);
          if (!t) return t.take_error();
          if (t->empty()) break;
        }
        return ok_status();
      }
      if (auto s = deliver(c, *size, on_body, &delivered); !s) return s;
      auto crlf = c.read_line(2);
      if (!crlf || !crlf->empty()) return Error(Code::kUnavailable, "malformed chunk terminator");
    }
  }
  const std::string cl = head.header("Content-Length");
  if (!cl.empty()) {
    auto len = parse_u64(trim(cl), 10);
    if (!len) return Error(Code::kUnavailable, "malformed Content-Length");
    auto s = deliver(c, *len, on_body, &delivered);
    if (!s && s.error().code == Code::kUnavailable)
      return Error(Code::kUnavailable, "connection closed after " + std::to_string(delivered) + " of " +
                                           std::to_string(*len) + " body bytes");
    return s;
  }
  // No framing: the body runs to the end of the connection.
  for (;;) {
    if (c.available() > 0) {
      if (auto s = deliver(c, c.available(), on_body, &delivered); !s) return s;
    }
    auto s = c.fill();
    if (!s) return c.eof() ? ok_status() : s;
  }
}

Result<HttpResponse> HttpClient::request(std::string_view method, std::string_view url, const HttpHeaders& headers,
                                         std::string_view body) const {
  HttpResponse out;
  auto s = stream(
      method, url, headers, body,
      [&](const HttpResponseHead& h) {
        out.status = h.status;
        out.headers = h.headers;
        return ok_status();
      },
      [&](const char* d, std::size_t n) -> Status {
        if (out.body.size() + n > options_.max_buffered_body)
          return Error(Code::kUnavailable, "response body larger than " +
                                               std::to_string(options_.max_buffered_body) + " bytes");
        out.body.append(d, n);
        return ok_status();
      });
  if (!s) return s.take_error();
  return out;
}

}  // namespace kiln::agent
