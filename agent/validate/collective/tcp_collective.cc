#include "agent/validate/collective/tcp_collective.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "agent/validate/collective/collective_check.h"
#include "agent/validate/collective/socket_io.h"
#include "common/ids.h"

namespace kiln::agent {

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::array<char, 8> kMagic = {'K', 'I', 'L', 'N', 'T', 'C', 'P', '1'};
constexpr std::size_t kNonceHex = 32;
constexpr std::size_t kHelloSize = kMagic.size() + kNonceHex + 4 * sizeof(std::uint32_t);
constexpr std::uint32_t kMaxFrameText = 4096;
// Connections that have not sent their hello yet; beyond this a stray
// client (a port scanner) is dropped at once.
constexpr std::size_t kMaxPending = 64;
// How long a refusal or an abort notice may take to send: it is a courtesy
// to the other end and must not hold up the root's own report.
constexpr auto kNoticeGrace = std::chrono::seconds(1);
constexpr const char* kNote =
    "test-only collective: plain TCP sockets through rank 0; measures the hosts' network stack, not a GPU fabric";

enum FrameType : std::uint32_t { kAccepted = 1, kRefused = 2, kGo = 3, kAbort = 4 };

void put_u32(char* p, std::uint32_t v) {
  const std::uint32_t be = htonl(v);
  std::memcpy(p, &be, sizeof be);
}

std::uint32_t get_u32(const char* p) {
  std::uint32_t be = 0;
  std::memcpy(&be, p, sizeof be);
  return ntohl(be);
}

IoResult send_frame(int fd, FrameType type, const std::string& text, const IoDeadline& d) {
  const std::string body = text.substr(0, kMaxFrameText);
  std::string frame(8, '\0');
  put_u32(frame.data(), type);
  put_u32(frame.data() + 4, static_cast<std::uint32_t>(body.size()));
  frame += body;
  return send_all(fd, frame.data(), frame.size(), d);
}

IoResult recv_frame(int fd, std::uint32_t& type, std::string& text, const IoDeadline& d) {
  char head[8];
  if (auto s = recv_all(fd, head, sizeof head, d); !s.ok()) return s;
  type = get_u32(head);
  const std::uint32_t len = get_u32(head + 4);
  if (len > kMaxFrameText) return io_closed("oversized frame from the other end");
  text.assign(len, '\0');
  return recv_all(fd, text.data(), len, d);
}

struct Hello {
  std::string magic;
  std::string nonce;
  std::uint32_t rank = 0, nodes = 0, max_mib = 0, iterations = 0;
};

std::array<char, kHelloSize> encode_hello(const std::string& nonce, const CollectiveArgs& a) {
  std::array<char, kHelloSize> b{};
  std::memcpy(b.data(), kMagic.data(), kMagic.size());
  std::memcpy(b.data() + kMagic.size(), nonce.data(), std::min(nonce.size(), kNonceHex));
  char* p = b.data() + kMagic.size() + kNonceHex;
  put_u32(p, static_cast<std::uint32_t>(a.rank));
  put_u32(p + 4, static_cast<std::uint32_t>(a.nodes));
  put_u32(p + 8, static_cast<std::uint32_t>(a.max_mib));
  put_u32(p + 12, static_cast<std::uint32_t>(a.iterations));
  return b;
}

Hello decode_hello(const std::array<char, kHelloSize>& b) {
  Hello h;
  h.magic.assign(b.data(), kMagic.size());
  h.nonce.assign(b.data() + kMagic.size(), kNonceHex);
  const char* p = b.data() + kMagic.size() + kNonceHex;
  h.rank = get_u32(p);
  h.nodes = get_u32(p + 4);
  h.max_mib = get_u32(p + 8);
  h.iterations = get_u32(p + 12);
  return h;
}

// "30 s", "0.5 s".
std::string seconds_text(std::chrono::milliseconds ms) {
  char b[32];
  if (ms.count() % 1000 == 0) std::snprintf(b, sizeof b, "%lld s", static_cast<long long>(ms.count() / 1000));
  else std::snprintf(b, sizeof b, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return b;
}

std::string mib_text(std::size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string peer_name(const sockaddr_in& sa) {
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
}

// "" when every value is `expect`; otherwise what was wrong.
std::string verify(const float* v, std::size_t count, float expect) {
  std::size_t wrong = 0, first = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (v[i] == expect) continue;
    if (wrong++ == 0) first = i;
  }
  if (wrong == 0) return "";
  char b[200];
  std::snprintf(b, sizeof b, "%zu of %zu values wrong (first at index %zu: %g, expected %g)", wrong, count, first,
                static_cast<double>(v[first]), static_cast<double>(expect));
  return b;
}

// n(n+1)/2: every rank r contributes r+1. Exact in a float for n <= 1024.
float expected_sum(int nodes) { return static_cast<float>(nodes) * static_cast<float>(nodes + 1) / 2.0f; }

CheckResult base_check(const CollectiveArgs& args, const TcpUniqueId& root) {
  CheckResult r = multinode_check(args, args.nodes);
  r.details["transport"] = {{"kind", "tcp"}, {"root", root.ip + ":" + std::to_string(root.port)}};
  r.details["note"] = kNote;
  return r;
}

// Ends a check that could not run: fail, value null, the reason.
CheckResult& could_not_run(CheckResult& r, const std::string& reason) {
  r.value = nullptr;
  add_failure(r, reason);
  return r;
}

// Fills in the headline figure once every size was measured.
void finish_sweep(CheckResult& r, const CollectiveArgs& args, const SweepPoint& largest,
                  const std::string& data_error) {
  if (!data_error.empty()) {
    could_not_run(r, data_error);
  } else {
    r.value = largest.busbw_gbps;
  }
  apply_min_busbw(r, args.min_busbw_gbps);
}

}  // namespace

Result<TcpUniqueId> parse_tcp_unique_id(std::string_view text) {
  auto bad = [&] {
    return Error(Code::kInvalidArgument, "not a tcp unique id: '" + std::string(text.substr(0, 80)) + "'");
  };
  constexpr std::string_view kPrefix = "tcp:";
  if (text.substr(0, kPrefix.size()) != kPrefix) return bad();
  std::string_view rest = text.substr(kPrefix.size());
  const auto c1 = rest.find(':');
  if (c1 == std::string_view::npos) return bad();
  const auto c2 = rest.find(':', c1 + 1);
  if (c2 == std::string_view::npos) return bad();
  TcpUniqueId id;
  id.ip = std::string(rest.substr(0, c1));
  const std::string_view port = rest.substr(c1 + 1, c2 - c1 - 1);
  const std::string_view nonce = rest.substr(c2 + 1);
  in_addr addr{};
  if (inet_pton(AF_INET, id.ip.c_str(), &addr) != 1) return bad();
  if (port.empty() || port.size() > 5) return bad();
  unsigned long p = 0;
  for (char ch : port) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return bad();
    p = p * 10 + static_cast<unsigned long>(ch - '0');
  }
  if (p == 0 || p > 65535) return bad();
  id.port = static_cast<std::uint16_t>(p);
  if (nonce.size() != kNonceHex) return bad();
  for (char ch : nonce) {
    if (!std::isxdigit(static_cast<unsigned char>(ch))) return bad();
    id.nonce.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  return id;
}

std::string format_tcp_unique_id(const TcpUniqueId& id) {
  return "tcp:" + id.ip + ":" + std::to_string(id.port) + ":" + id.nonce;
}

// --- rank 0 ---------------------------------------------------------------

Result<std::unique_ptr<TcpRoot>> TcpRoot::listen(const std::string& address, const CollectiveArgs& args) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1)
    return Error(Code::kInvalidArgument, "not an IPv4 address: '" + address + "'");
  std::unique_ptr<TcpRoot> root(new TcpRoot());
  root->args_ = args;
  root->args_.rank = 0;
  root->deadline_ = Clock::now() + args.timeout;
  if (pipe2(root->cancel_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    return Error(Code::kUnavailable, std::string("pipe: ") + std::strerror(errno));
  root->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (root->listen_fd_ < 0) return Error(Code::kUnavailable, std::string("socket: ") + std::strerror(errno));
  if (bind(root->listen_fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0)
    return Error(Code::kUnavailable, "cannot bind " + address + ": " + std::strerror(errno));
  if (::listen(root->listen_fd_, SOMAXCONN) != 0)
    return Error(Code::kUnavailable, std::string("listen: ") + std::strerror(errno));
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  if (getsockname(root->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len) != 0)
    return Error(Code::kUnavailable, std::string("getsockname: ") + std::strerror(errno));
  root->id_.ip = address;
  root->id_.port = ntohs(bound.sin_port);
  root->id_.nonce = random_hex(kNonceHex / 2);
  root->unique_id_ = format_tcp_unique_id(root->id_);
  return root;
}

TcpRoot::~TcpRoot() {
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : cancel_pipe_)
    if (fd >= 0) close(fd);
}

void TcpRoot::cancel() {
  const char b = 1;
  if (cancel_pipe_[1] >= 0) {
    const ssize_t w = write(cancel_pipe_[1], &b, 1);  // a full pipe is already cancelled
    (void)w;
  }
}

CheckResult TcpRoot::run() {
  CheckResult r = base_check(args_, id_);
  const IoDeadline d{deadline_, cancel_pipe_[0]};
  const int n = args_.nodes;
  std::vector<SocketFd> peers(static_cast<std::size_t>(n));  // by rank; [0] is us
  std::vector<std::string> refusals;

  // Tells every joined peer why the run is over, so it reports that rather
  // than waiting out its own deadline.
  auto abort_peers = [&](const std::string& why) {
    const IoDeadline grace{Clock::now() + kNoticeGrace, -1};
    for (auto& p : peers)
      if (p.valid()) (void)send_frame(p.get(), kAbort, why, grace);
  };

  // 1. Gather nodes-1 peers. Hellos are read as they arrive from every
  // pending connection at once, so a silent client cannot hold up the rest.
  struct Pending {
    SocketFd fd;
    std::string from;
    std::array<char, kHelloSize> buf{};
    std::size_t got = 0;
  };
  std::vector<Pending> pending;
  int joined = 0;
  auto admit = [&](Pending& p) {
    const Hello h = decode_hello(p.buf);
    std::string refuse;
    if (h.magic != std::string(kMagic.data(), kMagic.size())) refuse = "not a kiln tcp collective hello";
    else if (h.nonce != id_.nonce) refuse = "wrong nonce (not a participant of run " + args_.run + ")";
    else if (h.nodes != static_cast<std::uint32_t>(n))
      refuse = "nodes " + std::to_string(h.nodes) + " does not match the root's " + std::to_string(n);
    else if (h.rank < 1 || h.rank >= static_cast<std::uint32_t>(n))
      refuse = "rank " + std::to_string(h.rank) + " is out of range 1.." + std::to_string(n - 1);
    else if (peers[h.rank].valid()) refuse = "rank " + std::to_string(h.rank) + " has already joined";
    else if (h.max_mib != args_.max_mib || h.iterations != static_cast<std::uint32_t>(args_.iterations))
      refuse = "sweep (max_mib " + std::to_string(h.max_mib) + ", iterations " + std::to_string(h.iterations) +
               ") differs from the root's (" + std::to_string(args_.max_mib) + ", " +
               std::to_string(args_.iterations) + ")";
    const IoDeadline grace{std::min(d.at, Clock::now() + kNoticeGrace), d.cancel_fd};
    if (!refuse.empty()) {
      (void)send_frame(p.fd.get(), kRefused, refuse, grace);
      if (refusals.size() < 10) refusals.push_back("refused a peer from " + p.from + ": " + refuse);
      return;
    }
    if (send_frame(p.fd.get(), kAccepted, "", grace).ok()) {
      peers[h.rank] = std::move(p.fd);
      ++joined;
    }
  };
  std::string gather_error;
  while (joined < n - 1 && gather_error.empty()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(d.at - Clock::now());
    if (left.count() <= 0) {
      std::string missing;
      int count = 0;
      for (int k = 1; k < n; ++k) {
        if (peers[k].valid()) continue;
        if (++count <= 16) missing += (missing.empty() ? "" : ", ") + std::to_string(k);
      }
      if (count > 16) missing += ", ...";
      gather_error = "timed out after " + seconds_text(args_.timeout) + " waiting for " + std::to_string(count) +
                     " of " + std::to_string(n - 1) + " peers (ranks " + missing + ")";
      for (const auto& why : refusals) gather_error += "; " + why;
      break;
    }
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {d.cancel_fd, POLLIN, 0}};
    for (const auto& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
    if (ready < 0 && errno != EINTR) {
      gather_error = std::string("poll: ") + std::strerror(errno);
      break;
    }
    if (ready <= 0) continue;
    if (fds[1].revents != 0) {
      gather_error = "cancelled";
      break;
    }
    // Pending connections first (their pollfd indices are 2..), newest last.
    for (std::size_t i = pending.size(); i-- > 0;) {
      if (fds[i + 2].revents == 0) continue;
      Pending& p = pending[i];
      const ssize_t got = recv(p.fd.get(), p.buf.data() + p.got, p.buf.size() - p.got, MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
      if (got <= 0) {  // went away before saying hello
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      p.got += static_cast<std::size_t>(got);
      if (p.got < p.buf.size()) continue;
      admit(p);
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
    if (fds[0].revents != 0) {
      for (;;) {
        sockaddr_in sa{};
        socklen_t len = sizeof sa;
        const int c = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) break;  // EAGAIN: none left; anything else: try again at the next poll
        SocketFd conn(c);
        if (pending.size() >= kMaxPending) continue;  // closed: too many silent clients
        set_nodelay(c);
        pending.push_back(Pending{std::move(conn), peer_name(sa)});
      }
    }
  }
  // Late or stray connections are refused from here on.
  close(listen_fd_);
  listen_fd_ = -1;
  pending.clear();
  if (!gather_error.empty()) {
    abort_peers(gather_error);
    return could_not_run(r, gather_error);
  }
  if (!refusals.empty()) r.details["warnings"] = refusals;

  for (int k = 1; k < n; ++k) {
    if (auto s = send_frame(peers[k].get(), kGo, "", d); !s.ok()) {
      const std::string why =
          s.kind == Io::kCancelled
              ? "cancelled"
              : "rank " + std::to_string(k) + " went away before the sweep: " +
                    (s.kind == Io::kTimeout ? "timed out" : s.what);
      abort_peers(why);
      return could_not_run(r, why);
    }
  }

  // 2. The sweep: per size, one warm-up round and `iterations` timed ones.
  const auto sizes = sweep_sizes(args_.max_mib);
  const std::size_t max_count = sizes.back() / sizeof(float);
  std::vector<float> sum, incoming;
  try {
    sum.resize(max_count);
    incoming.resize(max_count);
  } catch (const std::bad_alloc&) {
    const std::string why = "cannot allocate 2 x " + mib_text(sizes.back()) + " for the sweep";
    abort_peers(why);
    return could_not_run(r, why);
  }
  const float expect = expected_sum(n);
  std::string data_error;
  SweepPoint largest;
  for (std::size_t bytes : sizes) {
    const std::size_t count = bytes / sizeof(float);
    double best_us = -1;
    for (int it = 0; it <= args_.iterations; ++it) {
      std::fill(sum.begin(), sum.begin() + static_cast<std::ptrdiff_t>(count), 1.0f);  // rank 0 adds 0+1
      const auto t0 = Clock::now();
      for (int k = 1; k < n; ++k) {
        IoResult s = recv_all(peers[k].get(), incoming.data(), bytes, d);
        if (s.ok()) {
          for (std::size_t i = 0; i < count; ++i) sum[i] += incoming[i];
          continue;
        }
        if (s.kind == Io::kCancelled) return could_not_run(r, "cancelled");
        return could_not_run(r, s.kind == Io::kTimeout
                                    ? "timed out after " + seconds_text(args_.timeout) + " in the " + mib_text(bytes) +
                                          " round waiting for rank " + std::to_string(k)
                                    : "rank " + std::to_string(k) + ": connection lost in the " + mib_text(bytes) +
                                          " round: " + s.what);
      }
      for (int k = 1; k < n; ++k) {
        IoResult s = send_all(peers[k].get(), sum.data(), bytes, d);
        if (s.ok()) continue;
        if (s.kind == Io::kCancelled) return could_not_run(r, "cancelled");
        return could_not_run(r, s.kind == Io::kTimeout
                                    ? "timed out after " + seconds_text(args_.timeout) + " in the " + mib_text(bytes) +
                                          " round sending to rank " + std::to_string(k)
                                    : "rank " + std::to_string(k) + ": connection lost in the " + mib_text(bytes) +
                                          " round: " + s.what);
      }
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      // Keep going after wrong data, so the peers finish their rounds and
      // report it themselves rather than a dropped connection.
      if (data_error.empty()) {
        if (std::string bad = verify(sum.data(), count, expect); !bad.empty())
          data_error = "rank 0: all-reduce result wrong at " + mib_text(bytes) + ": " + bad;
      }
      if (it > 0) best_us = best_us < 0 ? us : std::min(best_us, us);
    }
    largest = sweep_point(bytes, best_us, n);
    add_sweep_point(r, largest);
  }
  finish_sweep(r, args_, largest, data_error);
  return r;
}

// --- ranks 1..n-1 -----------------------------------------------------------

CheckResult run_tcp_peer(const CollectiveArgs& args) {
  const IoDeadline d{Clock::now() + args.timeout, -1};
  auto id = parse_tcp_unique_id(args.unique_id);
  CheckResult r = base_check(args, id ? *id : TcpUniqueId{});
  if (!id) return could_not_run(r, id.error().message);
  if (args.rank < 1 || args.rank >= args.nodes)
    return could_not_run(r, "rank " + std::to_string(args.rank) + " is not a peer of " + std::to_string(args.nodes) +
                                " nodes (rank 0 is the root)");
  const std::string root = id->ip + ":" + std::to_string(id->port);
  const std::string after = "timed out after " + seconds_text(args.timeout);

  // 1. Connect and say hello.
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(id->port);
  inet_pton(AF_INET, id->ip.c_str(), &sa.sin_addr);
  SocketFd fd(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return could_not_run(r, std::string("socket: ") + std::strerror(errno));
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS)
      return could_not_run(r, "cannot connect to the root at " + root + ": " + std::strerror(errno));
    IoResult s = wait_ready(fd.get(), POLLOUT, d);
    if (!s.ok()) return could_not_run(r, after + " connecting to the root at " + root);
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return could_not_run(r, "cannot connect to the root at " + root + ": " + std::strerror(err));
  }
  set_nodelay(fd.get());
  const auto hello = encode_hello(id->nonce, args);
  if (auto s = send_all(fd.get(), hello.data(), hello.size(), d); !s.ok())
    return could_not_run(r, s.kind == Io::kTimeout ? after + " sending the hello to the root at " + root
                                                   : "the root at " + root + " went away: " + s.what);

  // 2. Accepted, then go (once every peer has joined).
  std::uint32_t type = 0;
  std::string text;
  for (bool accepted = false;;) {
    IoResult s = recv_frame(fd.get(), type, text, d);
    if (!s.ok())
      return could_not_run(r, s.kind == Io::kTimeout
                                  ? after + (accepted ? " waiting for the root to start (not every peer joined)"
                                                      : " waiting for the root at " + root + " to accept this peer")
                                  : "the root at " + root + " closed the connection before the sweep: " + s.what);
    if (type == kRefused) return could_not_run(r, "the root at " + root + " refused this peer: " + text);
    if (type == kAbort) return could_not_run(r, "the root gave up: " + text);
    if (type == kAccepted && !accepted) {
      accepted = true;
      continue;
    }
    if (type == kGo && accepted) break;
    return could_not_run(r, "unexpected message from the root at " + root);
  }

  // 3. The sweep, mirroring TcpRoot::run.
  const auto sizes = sweep_sizes(args.max_mib);
  const std::size_t max_count = sizes.back() / sizeof(float);
  std::vector<float> mine, result;
  try {
    mine.assign(max_count, static_cast<float>(args.rank + 1));
    result.resize(max_count);
  } catch (const std::bad_alloc&) {
    return could_not_run(r, "cannot allocate 2 x " + mib_text(sizes.back()) + " for the sweep");
  }
  const float expect = expected_sum(args.nodes);
  std::string data_error;
  SweepPoint largest;
  for (std::size_t bytes : sizes) {
    const std::size_t count = bytes / sizeof(float);
    double best_us = -1;
    for (int it = 0; it <= args.iterations; ++it) {
      const auto t0 = Clock::now();
      IoResult s = send_all(fd.get(), mine.data(), bytes, d);
      if (s.ok()) s = recv_all(fd.get(), result.data(), bytes, d);
      if (!s.ok())
        return could_not_run(r, s.kind == Io::kTimeout
                                    ? after + " in the " + mib_text(bytes) + " round"
                                    : "the root closed the connection in the " + mib_text(bytes) + " round: " + s.what);
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      if (data_error.empty()) {
        if (std::string bad = verify(result.data(), count, expect); !bad.empty())
          data_error =
              "rank " + std::to_string(args.rank) + ": all-reduce result wrong at " + mib_text(bytes) + ": " + bad;
      }
      if (it > 0) best_us = best_us < 0 ? us : std::min(best_us, us);
    }
    largest = sweep_point(bytes, best_us, args.nodes);
    add_sweep_point(r, largest);
  }
  finish_sweep(r, args, largest, data_error);
  return r;
}

}  // namespace kiln::agent
