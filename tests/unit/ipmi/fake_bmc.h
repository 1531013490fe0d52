#pragma once
// A small scripted RMCP+ BMC on loopback UDP for the session unit tests:
// the BMC side of the handshake and a handful of chassis commands, with
// knobs to drop, duplicate or corrupt replies and to forget sessions.
//
// It reuses the codec's crypto primitives, so it proves the session logic
// (retries, matching, re-open), not interoperability: the ipmi_sim
// integration suite does that against an independent implementation.

#include <map>
#include <memory>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "drivers/ipmi/commands.h"
#include "drivers/ipmi/wire.h"

namespace kiln::ipmi::test {

namespace asio = boost::asio;

class FakeBmc {
 public:
  FakeBmc(asio::io_context& ioc, std::string user, std::string password)
      : user_(std::move(user)),
        password_(std::move(password)),
        socket_(ioc, asio::ip::udp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}

  uint16_t port() const { return socket_.local_endpoint().port(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }

  void start() {
    asio::co_spawn(socket_.get_executor(), serve(), asio::detached);
  }
  void stop() {
    boost::system::error_code ec;
    socket_.close(ec);
  }

  // Knobs.
  int drop_replies = 0;          // drop the next N replies to session commands
  bool silent = false;           // answer nothing at all
  bool duplicate_replies = false;
  int corrupt_replies = 0;       // flip a MAC byte in the next N session replies
  void forget_sessions() { sessions_.clear(); }

  // Observations.
  int sessions_opened = 0;
  int sessions_closed = 0;
  std::map<uint8_t, int> commands_seen;  // by cmd byte, session commands only
  uint8_t power = 0;
  uint8_t boot_device = 0;
  bool boot_persistent = false;

 private:
  struct Session {
    uint32_t console_sid = 0;
    uint32_t bmc_sid = 0;
    CipherSuite suite;
    RakpContext ctx;
    bool active = false;
    SessionKeys keys;
    uint32_t out_seq = 0;
  };

  asio::awaitable<void> serve() {
    Bytes buf(2048);
    asio::ip::udp::endpoint from;
    for (;;) {
      boost::system::error_code ec;
      size_t n = co_await socket_.async_receive_from(asio::buffer(buf), from,
                                                     asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;  // closed
      if (silent) continue;
      Bytes reply = handle(ByteView(buf.data(), n));
      if (reply.empty()) continue;
      socket_.send_to(asio::buffer(reply), from, 0, ec);
      if (duplicate_replies) socket_.send_to(asio::buffer(reply), from, 0, ec);
    }
  }

  static Bytes response_msg(const IpmiRequest& rq, uint8_t cc, const Bytes& data) {
    Bytes m{rq.rq_addr, static_cast<uint8_t>((rq.net_fn | 1) << 2)};
    m.push_back(ipmi_checksum(m));
    const size_t from = m.size();
    m.push_back(rq.rs_addr);
    m.push_back(static_cast<uint8_t>(rq.rq_seq << 2));
    m.push_back(rq.cmd);
    m.push_back(cc);
    m.insert(m.end(), data.begin(), data.end());
    m.push_back(ipmi_checksum(ByteView(m.data() + from, m.size() - from)));
    return m;
  }

  Bytes handle(ByteView d) {
    if (!is_v2_packet(d)) {
      auto msg = decode_v15_packet(d);
      if (!msg) return {};
      auto rq = decode_ipmi_request(*msg);
      if (!rq || rq->cmd != kCmdGetChannelAuthCaps) return {};
      return encode_v15_packet(response_msg(*rq, 0, Bytes{0x01, 0x80, 0x04, 0x02, 0, 0, 0, 0}));
    }
    // Session traffic: find keys by the session id in the header.
    const uint32_t sid = static_cast<uint32_t>(d[6]) | (static_cast<uint32_t>(d[7]) << 8) |
                         (static_cast<uint32_t>(d[8]) << 16) | (static_cast<uint32_t>(d[9]) << 24);
    Session* s = nullptr;
    if (auto it = sessions_.find(sid); it != sessions_.end()) s = &it->second;
    auto p = decode_v2_packet(d, s && s->active ? &s->keys : nullptr);
    if (!p) return {};
    const Bytes& pl = p->payload;
    switch (p->header.type) {
      case PayloadType::kOpenSessionRequest: {
        if (pl.size() != 32) return {};
        Session ns;
        ns.console_sid = static_cast<uint32_t>(pl[4] | (pl[5] << 8) | (pl[6] << 16)) |
                         (static_cast<uint32_t>(pl[7]) << 24);
        ns.bmc_sid = next_sid_++;
        const int suite = pl[12] == 0x03 ? 17 : 3;
        ns.suite = *cipher_suite(suite);
        OpenSessionResponse r;
        r.tag = pl[0];
        r.max_privilege = 4;
        r.console_session_id = ns.console_sid;
        r.bmc_session_id = ns.bmc_sid;
        r.auth = ns.suite.auth;
        r.integrity = ns.suite.integrity;
        r.confidentiality = ns.suite.confidentiality;
        sessions_[ns.bmc_sid] = ns;
        return encode_v2_packet({PayloadType::kOpenSessionResponse, false, false, 0, 0},
                                encode_open_session_response(r), nullptr);
      }
      case PayloadType::kRakp1: {
        if (pl.size() < 28) return {};
        const uint32_t bsid = static_cast<uint32_t>(pl[4] | (pl[5] << 8) | (pl[6] << 16)) |
                              (static_cast<uint32_t>(pl[7]) << 24);
        auto it = sessions_.find(bsid);
        if (it == sessions_.end()) return {};
        Session& ss = it->second;
        RakpContext& c = ss.ctx;
        c.console_session_id = ss.console_sid;
        c.bmc_session_id = ss.bmc_sid;
        std::copy(pl.begin() + 8, pl.begin() + 24, c.console_random.begin());
        c.role = pl[24];
        c.username.assign(pl.begin() + 28, pl.begin() + 28 + std::min<size_t>(pl[27], pl.size() - 28));
        Rakp2 r2;
        r2.tag = pl[0];
        r2.console_session_id = ss.console_sid;
        if (c.username != user_) {
          r2.status = 0x0D;
          return encode_v2_packet({PayloadType::kRakp2, false, false, 0, 0}, encode_rakp2(r2),
                                  nullptr);
        }
        Bytes rc = random_bytes(16);
        std::copy(rc.begin(), rc.end(), c.bmc_random.begin());
        for (size_t i = 0; i < 16; ++i) c.bmc_guid[i] = static_cast<uint8_t>(0xA0 + i);
        r2.bmc_random = c.bmc_random;
        r2.bmc_guid = c.bmc_guid;
        r2.auth_code = rakp2_auth_code(ss.suite.auth, password_key(password_), c);
        return encode_v2_packet({PayloadType::kRakp2, false, false, 0, 0}, encode_rakp2(r2), nullptr);
      }
      case PayloadType::kRakp3: {
        if (pl.size() < 8) return {};
        const uint32_t bsid = static_cast<uint32_t>(pl[4] | (pl[5] << 8) | (pl[6] << 16)) |
                              (static_cast<uint32_t>(pl[7]) << 24);
        auto it = sessions_.find(bsid);
        if (it == sessions_.end()) return {};
        Session& ss = it->second;
        const Bytes kuid = password_key(password_);
        Rakp4 r4;
        r4.tag = pl[0];
        r4.console_session_id = ss.console_sid;
        if (!bytes_equal(ByteView(pl.data() + 8, pl.size() - 8),
                         rakp3_auth_code(ss.suite.auth, kuid, ss.ctx))) {
          r4.status = 0x0F;
        } else {
          const Bytes sik = session_integrity_key(ss.suite.auth, kuid, ss.ctx);
          r4.icv = rakp4_icv(ss.suite.auth, sik, ss.ctx);
          ss.keys = derive_session_keys(ss.suite, sik);
          ss.active = true;
          ++sessions_opened;
        }
        return encode_v2_packet({PayloadType::kRakp4, false, false, 0, 0}, encode_rakp4(r4), nullptr);
      }
      case PayloadType::kIpmi: {
        if (!s || !s->active || !p->header.authenticated) return {};
        auto rq = decode_ipmi_request(pl);
        if (!rq) return {};
        ++commands_seen[rq->cmd];
        if (drop_replies > 0) {
          --drop_replies;
          return {};
        }
        uint8_t cc = 0;
        Bytes data;
        bool close = false;
        if (rq->net_fn == kNetFnApp && rq->cmd == kCmdSetSessionPrivilege) {
          data = {rq->data.empty() ? uint8_t{0} : rq->data[0]};
        } else if (rq->net_fn == kNetFnApp && rq->cmd == kCmdGetDeviceId) {
          data = {0, 3, 9, 8, 2, 0x9f, 0x91, 0x12, 0, 0x02, 0x0f};
        } else if (rq->net_fn == kNetFnApp && rq->cmd == kCmdCloseSession) {
          close = true;
        } else if (rq->net_fn == kNetFnChassis && rq->cmd == kCmdGetChassisStatus) {
          data = {power, 0, 0, 0};
        } else if (rq->net_fn == kNetFnChassis && rq->cmd == kCmdChassisControl) {
          const uint8_t c = rq->data.empty() ? 0xFF : rq->data[0];
          if (c == 0 || c == 5) power = 0;
          else if (c == 1 || c == 2 || c == 3) power = 1;
          else cc = 0xCC;
        } else if (rq->net_fn == kNetFnChassis && rq->cmd == kCmdSetBootOptions) {
          if (!rq->data.empty() && (rq->data[0] & 0x7F) == 5 && rq->data.size() >= 6) {
            boot_device = rq->data[2] & 0x3C;
            boot_persistent = (rq->data[1] & 0x40) != 0;
          } else if (!rq->data.empty() && (rq->data[0] & 0x7F) == 0) {
            cc = 0x80;  // "parameter not supported": the driver must shrug this off
          }
        } else if (rq->net_fn == kNetFnChassis && rq->cmd == kCmdGetBootOptions) {
          data = {1, 5, static_cast<uint8_t>(0x80 | (boot_persistent ? 0x40 : 0)), boot_device, 0, 0, 0};
        } else {
          cc = 0xC1;
        }
        Bytes msg = response_msg(*rq, cc, data);
        ++s->out_seq;
        Bytes reply = encode_v2_packet({PayloadType::kIpmi, true, true, s->console_sid, s->out_seq},
                                       msg, &s->keys, random_bytes(16));
        if (corrupt_replies > 0) {
          --corrupt_replies;
          reply.back() ^= 0x5A;
        }
        if (close) {
          sessions_.erase(s->bmc_sid);
          ++sessions_closed;
        }
        return reply;
      }
      default:
        return {};
    }
  }

  std::string user_;
  std::string password_;
  asio::ip::udp::socket socket_;
  std::map<uint32_t, Session> sessions_;
  uint32_t next_sid_ = 0x1000;
};

}  // namespace kiln::ipmi::test
