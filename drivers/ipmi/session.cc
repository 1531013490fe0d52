#include "drivers/ipmi/session.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kiln::ipmi {
namespace {

using std::chrono::milliseconds;

std::string endpoint_text(const BmcEndpoint& e) { return e.host + ":" + std::to_string(e.port); }

uint32_t random_u32_nonzero() {
  for (;;) {
    Bytes b = random_bytes(4);
    uint32_t v = static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
                 (static_cast<uint32_t>(b[2]) << 16) | (static_cast<uint32_t>(b[3]) << 24);
    if (v != 0) return v;
  }
}

template <size_t N>
std::array<uint8_t, N> random_array() {
  Bytes b = random_bytes(N);
  std::array<uint8_t, N> a{};
  std::copy(b.begin(), b.end(), a.begin());
  return a;
}

// Names of the handshake transactions (named constants, not literals: GCC 12
// cannot copy an array argument into a coroutine frame).
constexpr const char* kWhatGetChannelAuthenticationCapabilities =
    "Get Channel Authentication Capabilities";
constexpr const char* kWhatOpenSession = "Open Session";
constexpr const char* kWhatRAKP1 = "RAKP 1";
constexpr const char* kWhatRAKP3 = "RAKP 3";

// Tries for RAKP 1 and RAKP 3 before the handshake restarts from Open Session.
constexpr int kRakpTries = 2;
// Handshakes per open() (each restarts from Get Channel Auth Capabilities).
constexpr int kMaxHandshakes = 5;


}  // namespace

Result<BmcEndpoint> parse_bmc_address(std::string_view a) {
  const auto bad = [](std::string msg) { return Error::invalid("/bmc/address", std::move(msg)); };
  if (a.empty()) return bad("a BMC address is required (host or host:port)");
  BmcEndpoint e;
  std::string_view host = a;
  std::string_view port;
  if (a.front() == '[') {
    const size_t close = a.find(']');
    if (close == std::string_view::npos) return bad("unterminated [IPv6] address");
    host = a.substr(1, close - 1);
    std::string_view rest = a.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("expected :port after ]");
      port = rest.substr(1);
      if (port.empty()) return bad("empty port");
    }
  } else {
    const size_t colon = a.find(':');
    if (colon != std::string_view::npos) {
      if (a.find(':', colon + 1) != std::string_view::npos) {
        return bad("IPv6 addresses must be written [addr]:port");
      }
      host = a.substr(0, colon);
      port = a.substr(colon + 1);
      if (port.empty()) return bad("empty port");
    }
  }
  if (host.empty()) return bad("empty host");
  for (char c : host) {
    if (c == ' ' || c == '/' || c == '\t') return bad("host contains invalid characters");
  }
  e.host = std::string(host);
  if (!port.empty()) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc() || p != port.data() + port.size() || v == 0 || v > 65535) {
      return bad("port must be a number in 1..65535");
    }
    e.port = static_cast<uint16_t>(v);
  }
  return e;
}

IpmiSession::IpmiSession(asio::any_io_executor ex, SessionConfig cfg, Logger log)
    : cfg_(std::move(cfg)),
      log_(log.with("bmc", endpoint_text(cfg_.endpoint))),
      socket_(ex),
      recv_timer_(ex),
      sleep_timer_(ex),
      rx_(kMaxDatagram + 1) {}

IpmiSession::~IpmiSession() = default;

void IpmiSession::reset_session_state() {
  active_ = false;
  bmc_sid_ = 0;
  out_seq_ = 0;
  keys_ = SessionKeys{};
  window_ = ReplayWindow{};
}

asio::awaitable<void> IpmiSession::sleep_until(SteadyClock::time_point until) {
  if (SteadyClock::now() >= until) co_return;
  sleep_timer_.expires_at(until);
  boost::system::error_code ec;
  co_await sleep_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

asio::awaitable<Result<size_t>> IpmiSession::receive_until(SteadyClock::time_point until) {
  if (SteadyClock::now() >= until) co_return Error(Code::kTimeout, "receive deadline passed");
  // Boost 1.74 has no awaitable operators: a timer cancels the pending
  // receive instead. The generation guards against a timer handler that was
  // already queued when the receive completed cancelling the next receive.
  const uint64_t gen = ++recv_generation_;
  recv_timer_.expires_at(until);
  recv_timer_.async_wait([this, gen](const boost::system::error_code& ec) {
    if (!ec && gen == recv_generation_) {
      boost::system::error_code ignored;
      socket_.cancel(ignored);
    }
  });
  boost::system::error_code ec;
  const size_t n = co_await socket_.async_receive(asio::buffer(rx_),
                                                  asio::redirect_error(asio::use_awaitable, ec));
  ++recv_generation_;
  recv_timer_.cancel();
  if (ec == asio::error::operation_aborted) co_return Error(Code::kTimeout, "no datagram in time");
  if (ec) co_return Error(Code::kUnavailable, "receive from BMC failed: " + ec.message());
  co_return n;
}

template <typename T, typename Build, typename Match>
asio::awaitable<Result<T>> IpmiSession::transact(std::string_view what, Build& build, Match& match,
                                                 SteadyClock::time_point deadline, int max_tries) {
  if (max_tries <= 0) max_tries = cfg_.max_tries;
  if (cfg_.min_spacing.count() > 0 && last_send_ != SteadyClock::time_point{}) {
    co_await sleep_until(std::min(last_send_ + cfg_.min_spacing, deadline));
  }
  milliseconds timeout = cfg_.request_timeout;
  std::string last_problem;
  int tries = 0;
  for (; tries < std::max(1, max_tries); ++tries) {
    const auto now = SteadyClock::now();
    if (now >= deadline) break;
    const Bytes packet = build();
    last_send_ = now;
    boost::system::error_code ec;
    co_await socket_.async_send(asio::buffer(packet), asio::redirect_error(asio::use_awaitable, ec));
    const auto attempt_end = std::min(now + timeout, deadline);
    if (ec) {
      last_problem = "send failed: " + ec.message();
      co_await sleep_until(attempt_end);
    }
    while (!ec) {
      auto n = co_await receive_until(attempt_end);
      if (!n) {
        if (n.error().code != Code::kTimeout) {
          // e.g. ICMP port unreachable surfacing as connection refused: keep
          // the attempt's pacing rather than spinning.
          last_problem = n.error().message;
          co_await sleep_until(attempt_end);
        }
        break;
      }
      std::optional<Result<T>> verdict = match(ByteView(rx_.data(), *n));
      if (verdict.has_value()) co_return std::move(*verdict);
    }
    timeout = std::min(timeout * 2, cfg_.max_request_timeout);
    if (tries + 1 < max_tries) {
      log_.debug("ipmi retransmit", {{"what", std::string(what)}, {"try", std::to_string(tries + 2)}});
    }
  }
  std::string msg = "no answer from BMC " + endpoint_text(cfg_.endpoint) + " to " +
                    std::string(what) + " after " + std::to_string(tries) + " tries";
  if (!last_problem.empty()) msg += " (" + last_problem + ")";
  co_return Error(Code::kTimeout, std::move(msg));
}

asio::awaitable<Status> IpmiSession::connect(SteadyClock::time_point deadline) {
  if (connected_) co_return ok_status();
  boost::system::error_code ec;
  asio::ip::udp::endpoint ep;
  const auto addr = asio::ip::make_address(cfg_.endpoint.host, ec);
  if (!ec) {
    ep = asio::ip::udp::endpoint(addr, cfg_.endpoint.port);
  } else {
    asio::ip::udp::resolver resolver(socket_.get_executor());
    // The resolver has no deadline of its own: a timer cancels it.
    asio::steady_timer guard(socket_.get_executor());
    guard.expires_at(deadline);
    bool done = false;
    guard.async_wait([&resolver, &done](const boost::system::error_code& e) {
      if (!e && !done) resolver.cancel();
    });
    auto results = co_await resolver.async_resolve(
        cfg_.endpoint.host, std::to_string(cfg_.endpoint.port),
        asio::redirect_error(asio::use_awaitable, ec));
    done = true;
    guard.cancel();
    if (ec == asio::error::operation_aborted) {
      co_return Error(Code::kTimeout, "resolving BMC host " + cfg_.endpoint.host + " timed out");
    }
    if (ec || results.empty()) {
      co_return Error(Code::kUnavailable,
                      "cannot resolve BMC host " + cfg_.endpoint.host + ": " + ec.message());
    }
    ep = results.begin()->endpoint();
  }
  socket_.open(ep.protocol(), ec);
  if (!ec) socket_.connect(ep, ec);
  if (ec) {
    boost::system::error_code ignored;
    socket_.close(ignored);
    co_return Error(Code::kUnavailable,
                    "cannot open UDP socket to " + endpoint_text(cfg_.endpoint) + ": " + ec.message());
  }
  connected_ = true;
  co_return ok_status();
}

asio::awaitable<Status> IpmiSession::open(SteadyClock::time_point deadline) {
  if (cfg_.username.size() > 16) {
    co_return Error::invalid("/bmc/username", "IPMI user names are at most 16 bytes");
  }
  if (cfg_.password.size() > 20) {
    co_return Error::invalid("/bmc/password", "IPMI v2.0 passwords are at most 20 bytes");
  }
  close_now();  // never leave a live session behind on the BMC
  if (auto s = co_await connect(deadline); !s) co_return s;

  Status last = Error(Code::kTimeout, "session handshake with " + endpoint_text(cfg_.endpoint) +
                                          " did not finish before the deadline");
  for (int attempt = 0; attempt < kMaxHandshakes && SteadyClock::now() < deadline; ++attempt) {
    Status s = co_await handshake(deadline);
    if (s) {
      log_.debug("ipmi session opened", {{"suite", std::to_string(cfg_.suite.id)}});
      co_return s;
    }
    reset_session_state();
    last = s;
    // Only transient failures are worth a fresh handshake: credentials
    // refused, no cipher suite match etc. will not change.
    if (s.error().code != Code::kTimeout && !handshake_retryable_) break;
    log_.debug("ipmi handshake restart", {{"error", s.error().message}});
  }
  co_return last;
}

asio::awaitable<Status> IpmiSession::handshake(SteadyClock::time_point deadline) {
  const std::string bmc = endpoint_text(cfg_.endpoint);
  const uint8_t priv = static_cast<uint8_t>(cfg_.privilege);
  handshake_retryable_ = false;

  // 1. Get Channel Authentication Capabilities (IPMI v1.5, no session).
  {
    const uint8_t rq = static_cast<uint8_t>((++rq_seq_) & 0x3F);
    auto build = [&] {
      IpmiRequest req{kNetFnApp, kCmdGetChannelAuthCaps, rq, channel_auth_caps_request(priv)};
      return encode_v15_packet(encode_ipmi_request(req));
    };
    auto match = [&](ByteView d) -> std::optional<Result<ChannelAuthCaps>> {
      auto msg = decode_v15_packet(d);
      if (!msg) return std::nullopt;
      auto rsp = decode_ipmi_response(*msg);
      if (!rsp || rsp->rq_seq != rq || rsp->cmd != kCmdGetChannelAuthCaps) return std::nullopt;
      if (rsp->completion_code != 0) {
        return Result<ChannelAuthCaps>(Error(
            Code::kDriverError, "BMC " + bmc + " refused Get Channel Authentication Capabilities: " +
                                    completion_code_text(rsp->completion_code)));
      }
      return parse_channel_auth_caps(rsp->data);
    };
    auto caps = co_await transact<ChannelAuthCaps>(
        std::string_view(kWhatGetChannelAuthenticationCapabilities), build, match, deadline);
    if (!caps) co_return caps.error();
    if (!caps->ipmi20_supported) {
      co_return Error(Code::kDriverError, "BMC " + bmc + " does not support IPMI v2.0 (RMCP+)");
    }
  }

  // 2. Open Session.
  console_sid_ = random_u32_nonzero();
  const uint8_t tag = random_bytes(1)[0];
  {
    OpenSessionRequest req{tag, priv, console_sid_, cfg_.suite};
    const Bytes payload = encode_open_session_request(req);
    auto build = [&] {
      return encode_v2_packet({PayloadType::kOpenSessionRequest, false, false, 0, 0}, payload,
                              nullptr);
    };
    auto match = [&](ByteView d) -> std::optional<Result<OpenSessionResponse>> {
      auto p = decode_v2_packet(d, nullptr);
      if (!p || p->header.type != PayloadType::kOpenSessionResponse) return std::nullopt;
      auto r = decode_open_session_response(p->payload);
      if (!r || r->tag != tag) return std::nullopt;
      if (r->status != 0) {
        const Code code = rmcp_status_is_auth_failure(r->status) ? Code::kUnauthenticated
                                                                 : Code::kDriverError;
        return Result<OpenSessionResponse>(
            Error(code, "BMC " + bmc + " refused Open Session (cipher suite " +
                            std::to_string(cfg_.suite.id) + "): " + rmcp_status_text(r->status)));
      }
      if (r->console_session_id != console_sid_) return std::nullopt;
      return r;
    };
    auto rsp = co_await transact<OpenSessionResponse>(std::string_view(kWhatOpenSession), build,
                                                      match, deadline);
    if (!rsp) co_return rsp.error();
    if (rsp->auth != cfg_.suite.auth || rsp->integrity != cfg_.suite.integrity ||
        rsp->confidentiality != cfg_.suite.confidentiality) {
      co_return Error(Code::kDriverError, "BMC " + bmc + " answered Open Session with other "
                                          "algorithms than cipher suite " +
                                              std::to_string(cfg_.suite.id));
    }
    if (rsp->bmc_session_id == 0) {
      co_return Error(Code::kDriverError, "BMC " + bmc + " assigned session id 0");
    }
    bmc_sid_ = rsp->bmc_session_id;
  }

  // 3. RAKP 1 / 2: the BMC proves it knows the password.
  RakpContext ctx;
  ctx.console_session_id = console_sid_;
  ctx.bmc_session_id = bmc_sid_;
  ctx.console_random = random_array<16>();
  ctx.role = static_cast<uint8_t>(kNameOnlyLookup | priv);
  ctx.username = cfg_.username;
  const Bytes kuid = password_key(cfg_.password);
  const AuthAlg auth = cfg_.suite.auth;
  {
    Rakp1 r1{tag, bmc_sid_, ctx.console_random, ctx.role, cfg_.username};
    const Bytes payload = encode_rakp1(r1);
    auto build = [&] {
      return encode_v2_packet({PayloadType::kRakp1, false, false, 0, 0}, payload, nullptr);
    };
    auto match = [&](ByteView d) -> std::optional<Result<Rakp2>> {
      auto p = decode_v2_packet(d, nullptr);
      if (!p || p->header.type != PayloadType::kRakp2) return std::nullopt;
      auto r = decode_rakp2(p->payload, rakp_auth_code_len(auth));
      if (!r || r->tag != tag) return std::nullopt;
      if (r->status != 0) {
        const bool auth_fail = rmcp_status_is_auth_failure(r->status);
        std::string msg = "BMC " + bmc + " rejected RAKP 1 for user \"" + cfg_.username +
                          "\": " + rmcp_status_text(r->status);
        if (r->status == 0x02 || r->status == 0x08) handshake_retryable_ = true;
        return Result<Rakp2>(Error(auth_fail ? Code::kUnauthenticated : Code::kDriverError, msg));
      }
      if (r->console_session_id != console_sid_) return std::nullopt;
      return r;
    };
    // A BMC that already answered RAKP 1 may ignore a resend (its session
    // moved on), so after two tries the whole handshake starts over.
    auto r2 = co_await transact<Rakp2>(std::string_view(kWhatRAKP1), build, match, deadline,
                                       kRakpTries);
    if (!r2) co_return r2.error();
    ctx.bmc_random = r2->bmc_random;
    ctx.bmc_guid = r2->bmc_guid;
    if (!bytes_equal(rakp2_auth_code(auth, kuid, ctx), r2->auth_code)) {
      co_return Error(Code::kUnauthenticated,
                      "RAKP2 integrity check failed: wrong password? (BMC " + bmc + ", user \"" +
                          cfg_.username + "\")");
    }
  }

  // 4. RAKP 3 / 4: we prove it; both sides now hold the SIK.
  const Bytes sik = session_integrity_key(auth, kuid, ctx);
  {
    Rakp3 r3{tag, 0, bmc_sid_, rakp3_auth_code(auth, kuid, ctx)};
    const Bytes payload = encode_rakp3(r3);
    auto build = [&] {
      return encode_v2_packet({PayloadType::kRakp3, false, false, 0, 0}, payload, nullptr);
    };
    auto match = [&](ByteView d) -> std::optional<Result<Rakp4>> {
      auto p = decode_v2_packet(d, nullptr);
      if (!p || p->header.type != PayloadType::kRakp4) return std::nullopt;
      auto r = decode_rakp4(p->payload, rakp4_icv_len(auth));
      if (!r || r->tag != tag) return std::nullopt;
      if (r->status != 0) {
        // 0x0F after a correct RAKP2 means the BMC holds other nonces than we
        // do (a retransmitted RAKP 1 was answered twice): start over.
        const bool restart = r->status == 0x0F || r->status == 0x02 || r->status == 0x08;
        std::string msg = "BMC " + bmc + " rejected RAKP 3: " + rmcp_status_text(r->status);
        if (restart) handshake_retryable_ = true;
        const Code code = !restart && rmcp_status_is_auth_failure(r->status)
                              ? Code::kUnauthenticated
                              : Code::kDriverError;
        return Result<Rakp4>(Error(code, msg));
      }
      if (r->console_session_id != console_sid_) return std::nullopt;
      return r;
    };
    auto r4 = co_await transact<Rakp4>(std::string_view(kWhatRAKP3), build, match, deadline,
                                       kRakpTries);
    if (!r4) co_return r4.error();
    if (!bytes_equal(rakp4_icv(auth, sik, ctx), r4->icv)) {
      handshake_retryable_ = true;
      co_return Error(Code::kDriverError,
                      "RAKP4 integrity check failed (BMC " + bmc + " derived another key)");
    }
  }
  keys_ = derive_session_keys(cfg_.suite, sik);
  active_ = true;
  last_used_ = SteadyClock::now();

  // 5. Raise the session to the privilege we asked for (sessions start at USER).
  // Named, not a braced temporary: GCC 12 rejects initializer_list
  // temporaries inside a co_await expression.
  const Bytes priv_data(1, priv);
  auto rsp = co_await session_request(kNetFnApp, kCmdSetSessionPrivilege, priv_data, deadline);
  if (!rsp) co_return rsp.error();
  if (rsp->completion_code != 0) {
    co_await close(deadline);
    co_return Error(Code::kUnauthenticated,
                    "BMC " + bmc + " refused privilege level " + std::to_string(priv) +
                        " for user \"" + cfg_.username + "\": " +
                        completion_code_text(rsp->completion_code));
  }
  co_return ok_status();
}

Bytes IpmiSession::build_session_packet(const Bytes& ipmi_msg) {
  ++out_seq_;
  if (out_seq_ == 0) out_seq_ = 1;
  const bool encrypt = cfg_.suite.confidentiality != ConfidentialityAlg::kNone;
  const bool sign = cfg_.suite.integrity != IntegrityAlg::kNone;
  const Bytes iv = encrypt ? random_bytes(16) : Bytes{};
  return encode_v2_packet({PayloadType::kIpmi, encrypt, sign, bmc_sid_, out_seq_}, ipmi_msg,
                          &keys_, iv);
}

asio::awaitable<Result<IpmiResponse>> IpmiSession::session_request(
    uint8_t net_fn, uint8_t cmd, const Bytes& data, SteadyClock::time_point deadline,
    int max_tries) {
  rq_seq_ = static_cast<uint8_t>((rq_seq_ + 1) & 0x3F);
  const uint8_t rq = rq_seq_;
  const Bytes msg = encode_ipmi_request(IpmiRequest{net_fn, cmd, rq, data});
  const bool encrypted = cfg_.suite.confidentiality != ConfidentialityAlg::kNone;
  const bool signed_ = cfg_.suite.integrity != IntegrityAlg::kNone;
  auto build = [&] { return build_session_packet(msg); };
  auto match = [&](ByteView d) -> std::optional<Result<IpmiResponse>> {
    if (!is_v2_packet(d)) return std::nullopt;
    auto p = decode_v2_packet(d, &keys_);
    if (!p) {
      log_.debug("ipmi dropped datagram", {{"reason", p.error().message}});
      return std::nullopt;
    }
    const V2Header& h = p->header;
    if (h.type != PayloadType::kIpmi || h.session_id != console_sid_ ||
        h.encrypted != encrypted || h.authenticated != signed_) {
      return std::nullopt;
    }
    if (!window_.accept(h.sequence)) {
      log_.debug("ipmi dropped replayed datagram", {{"seq", std::to_string(h.sequence)}});
      return std::nullopt;
    }
    auto rsp = decode_ipmi_response(p->payload);
    if (!rsp || rsp->rq_seq != rq || rsp->cmd != cmd || rsp->net_fn != (net_fn | 1)) {
      return std::nullopt;
    }
    return rsp;
  };
  char buf[40];
  std::snprintf(buf, sizeof buf, "IPMI netfn 0x%02X cmd 0x%02X", net_fn, cmd);
  // A named string_view, not the array: GCC 12 cannot copy an array argument
  // into a coroutine frame ("array used as initializer").
  const std::string_view what(buf);
  auto r = co_await transact<IpmiResponse>(what, build, match, deadline, max_tries);
  if (r) last_used_ = SteadyClock::now();
  co_return r;
}

asio::awaitable<Result<IpmiResponse>> IpmiSession::command(uint8_t net_fn, uint8_t cmd, Bytes data,
                                                           SteadyClock::time_point deadline) {
  bool fresh = false;
  if (active_ && SteadyClock::now() - last_used_ > cfg_.idle_reopen) {
    log_.debug("ipmi session idle too long; re-opening");
    close_now();
  }
  if (!active_) {
    if (auto s = co_await open(deadline); !s) co_return s.error();
    fresh = true;
  }
  auto r = co_await session_request(net_fn, cmd, data, deadline);
  if (r || fresh || r.error().code != Code::kTimeout || SteadyClock::now() >= deadline) co_return r;

  // The BMC may have dropped our session (expiry, BMC reboot): re-open once.
  log_.info("ipmi session unanswered; re-opening once", {{"error", r.error().message}});
  reset_session_state();
  if (auto s = co_await open(deadline); !s) co_return s.error();
  co_return co_await session_request(net_fn, cmd, data, deadline);
}

asio::awaitable<void> IpmiSession::close(SteadyClock::time_point deadline) {
  if (!active_) co_return;
  Bytes sid;
  for (int i = 0; i < 4; ++i) sid.push_back(static_cast<uint8_t>(bmc_sid_ >> (8 * i)));
  auto r = co_await session_request(kNetFnApp, kCmdCloseSession, sid,
                                    std::min(deadline, SteadyClock::now() + cfg_.request_timeout),
                                    /*max_tries=*/1);
  if (!r) log_.debug("ipmi close session unanswered", {{"error", r.error().message}});
  reset_session_state();
}

void IpmiSession::close_now() {
  if (active_ && connected_) {
    Bytes sid;
    for (int i = 0; i < 4; ++i) sid.push_back(static_cast<uint8_t>(bmc_sid_ >> (8 * i)));
    rq_seq_ = static_cast<uint8_t>((rq_seq_ + 1) & 0x3F);
    const Bytes pkt =
        build_session_packet(encode_ipmi_request(IpmiRequest{kNetFnApp, kCmdCloseSession, rq_seq_, sid}));
    boost::system::error_code ec;
    socket_.send(asio::buffer(pkt), 0, ec);
  }
  reset_session_state();
}

}  // namespace kiln::ipmi
