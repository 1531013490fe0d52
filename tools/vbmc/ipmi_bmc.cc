#include "tools/vbmc/ipmi_bmc.h"

#include <algorithm>

#include "drivers/ipmi/byte_order.h"
#include "drivers/ipmi/commands.h"

namespace kiln::vbmc {

namespace {

using ipmi::Bytes;
using ipmi::ByteView;
using ipmi::get_u32le;
using ipmi::PayloadType;

// Commands only the BMC side needs (22.15 Get Channel Cipher Suites).
constexpr uint8_t kCmdGetChannelCipherSuites = 0x54;
// The channel this BMC answers for (a LAN channel number; 0x0E = "this one").
constexpr uint8_t kLanChannel = 0x01;

// RMCP+ status codes (Table 13-15) the BMC sends.
constexpr uint8_t kStatusNoResources = 0x01;
constexpr uint8_t kStatusInvalidSessionId = 0x02;
constexpr uint8_t kStatusInvalidRole = 0x09;
constexpr uint8_t kStatusUnauthorizedRole = 0x0A;
constexpr uint8_t kStatusUnauthorizedName = 0x0D;
constexpr uint8_t kStatusInvalidIntegrityCheck = 0x0F;
constexpr uint8_t kStatusNoCipherSuiteMatch = 0x11;

// Completion codes (Table 5-2 and command-specific ones).
constexpr uint8_t kCcOk = 0x00;
constexpr uint8_t kCcParamNotSupported = 0x80;  // boot options: parameter not supported
constexpr uint8_t kCcPrivilegeNotAvailable = 0x80;
constexpr uint8_t kCcPrivilegeExceedsLimit = 0x81;
constexpr uint8_t kCcInvalidSessionId = 0x87;
constexpr uint8_t kCcInvalidCommand = 0xC1;
constexpr uint8_t kCcLengthInvalid = 0xC7;
constexpr uint8_t kCcInvalidData = 0xCC;
constexpr uint8_t kCcInsufficientPrivilege = 0xD4;
constexpr uint8_t kCcUnspecified = 0xFF;

constexpr uint8_t kPrivUser = 2;
constexpr uint8_t kPrivOperator = 3;
constexpr uint8_t kPrivAdmin = 4;

uint32_t random_session_id() {
  for (;;) {
    Bytes b = ipmi::random_bytes(4);
    const uint32_t v = get_u32le(b, 0);
    if (v != 0) return v;
  }
}

// An answer without data. (A named helper: coroutines here return no braced
// temporaries, see docs/coroutines.md.)
Bytes unauthenticated(PayloadType type, const Bytes& payload) {
  ipmi::V2Header h;
  h.type = type;
  return ipmi::encode_v2_packet(h, payload, nullptr);
}

// Boot device selector (param 5 data byte 2, bits 5:2, unshifted here) <->
// Redfish BootSourceOverrideTarget.
std::optional<std::string> target_for_selector(uint8_t selector) {
  if (selector == 0x00) return std::string("None");
  if (selector == ipmi::kBootDevicePxe) return std::string("Pxe");
  if (selector == ipmi::kBootDeviceDisk || selector == 0x0C) return std::string("Hdd");
  if (selector == 0x14) return std::string("Cd");
  if (selector == 0x18) return std::string("BiosSetup");
  if (selector == 0x3C) return std::string("Usb");  // "remote removable media"
  return std::nullopt;
}

uint8_t selector_for_target(const std::string& target) {
  if (target == "Pxe" || target == "UefiHttp") return ipmi::kBootDevicePxe;
  if (target == "Hdd") return ipmi::kBootDeviceDisk;
  if (target == "Cd") return 0x14;
  if (target == "BiosSetup") return 0x18;
  if (target == "Usb") return 0x3C;
  return 0x00;
}

// ---- Answers (plain functions: coroutines here build no braced temporaries) ----

using Answer = IpmiBmc::Answer;

Answer cc_only(uint8_t cc) {
  Answer a;
  a.cc = cc;
  return a;
}

Answer device_id_answer() {
  // 20.1: device id, revision, firmware 1.00, IPMI 2.0, chassis device,
  // manufacturer 0 (none registered), product "VK", aux firmware.
  return Answer{kCcOk, {0x20, 0x01, 0x01, 0x00, 0x02, 0x80, 0x00, 0x00, 0x00, 0x4B, 0x56,
                        0x00, 0x00, 0x00, 0x00}};
}

Answer chassis_status_answer(bool on) {
  // 28.2: current power state (bit 0 on; bits 6:5 restore policy 01b
  // "previous state"), last power event, misc chassis state, front panel.
  return Answer{kCcOk, {static_cast<uint8_t>((on ? 0x01 : 0x00) | 0x20), 0x00, 0x00, 0x00}};
}

// 28.13: [parameter version 1, parameter selector, parameter data...].
Answer boot_param_answer(uint8_t param, uint8_t b1) { return Answer{kCcOk, {0x01, param, b1}}; }
Answer boot_param_answer(uint8_t param, uint8_t b1, uint8_t b2) {
  return Answer{kCcOk, {0x01, param, b1, b2}};
}

Answer boot_flags_answer(const BootOverride& b) {
  uint8_t b1 = 0;
  uint8_t selector = 0;
  if (b.enabled != "Disabled" && b.target != "None") {
    b1 |= ipmi::kBootFlagValid;
    if (b.enabled == "Continuous") b1 |= ipmi::kBootFlagPersistent;
    selector = selector_for_target(b.target);
  }
  if (b.mode == "UEFI") b1 |= ipmi::kBootFlagEfi;
  return Answer{kCcOk, {0x01, ipmi::kBootParamBootFlags, b1, selector, 0x00, 0x00, 0x00}};
}

}  // namespace

IpmiBmc::IpmiBmc(MachineBackend& backend, std::string machine_id, IpmiBmcOptions opts, Logger log)
    : backend_(backend), machine_id_(std::move(machine_id)), opts_(std::move(opts)),
      log_(std::move(log)) {}

std::size_t IpmiBmc::active_session_count() const {
  std::size_t n = 0;
  for (const auto& kv : sessions_) n += kv.second.stage == Stage::kActive ? 1 : 0;
  return n;
}

IpmiBmc::Session* IpmiBmc::find(uint32_t bmc_sid) {
  auto it = sessions_.find(bmc_sid);
  return it == sessions_.end() ? nullptr : &it->second;
}

bool IpmiBmc::make_room() {
  const auto now = SteadyClock::now();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (now - it->second.last_seen > opts_.session_timeout) {
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  if (sessions_.size() < opts_.max_sessions) return true;
  // Still full: give up the oldest half-open handshake, never an active session.
  auto oldest = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->second.stage == Stage::kActive) continue;
    if (oldest == sessions_.end() || it->second.last_seen < oldest->second.last_seen) oldest = it;
  }
  if (oldest == sessions_.end()) return false;
  sessions_.erase(oldest);
  return true;
}

// ---- Datagrams --------------------------------------------------------------------------------

asio::awaitable<std::optional<Bytes>> IpmiBmc::handle(ByteView d) {
  if (!ipmi::is_v2_packet(d)) co_return pre_session(d);
  if (d.size() < 16) co_return std::nullopt;
  const uint32_t sid = get_u32le(d, 6);
  Session* s = sid == 0 ? nullptr : find(sid);
  const bool active = s != nullptr && s->stage == Stage::kActive;
  auto p = ipmi::decode_v2_packet(d, active ? &s->keys : nullptr);
  if (!p) {
    log_.debug("ipmi: dropped datagram", {{"reason", p.error().message}});
    co_return std::nullopt;
  }
  const PayloadType type = p->header.type;
  if (type == PayloadType::kOpenSessionRequest) {
    if (sid != 0) co_return std::nullopt;
    co_return open_session(p->payload);
  }
  if (type == PayloadType::kRakp1) co_return rakp1(p->payload);
  if (type == PayloadType::kRakp3) co_return rakp3(p->payload);
  if (type != PayloadType::kIpmi) co_return std::nullopt;

  auto req = ipmi::decode_ipmi_request(p->payload);
  if (!req) co_return std::nullopt;
  if (sid == 0) {
    // Pre-session commands may come in unauthenticated v2.0 framing too.
    std::optional<Answer> a = pre_session_command(*req);
    if (!a) co_return std::nullopt;
    const Bytes msg = ipmi::encode_ipmi_response(*req, a->cc, a->data);
    co_return unauthenticated(PayloadType::kIpmi, msg);
  }
  // Inside a session, suites 3 and 17 sign and encrypt everything; the
  // sequence number must be fresh (the MAC was checked by decode_v2_packet).
  if (!active || !p->header.authenticated || !p->header.encrypted) co_return std::nullopt;
  if (!s->window.accept(p->header.sequence)) {
    log_.debug("ipmi: dropped replayed datagram", {{"seq", std::to_string(p->header.sequence)}});
    co_return std::nullopt;
  }
  s->last_seen = SteadyClock::now();

  Answer a;
  bool closed_caller = false;
  if (req->net_fn == ipmi::kNetFnApp && req->cmd == ipmi::kCmdCloseSession) {
    a = close_session(sid, *req, closed_caller);
  } else {
    a = co_await command(sid, *req);
  }
  // The back-end call may have taken a while; look the session up again.
  s = find(sid);
  if (s == nullptr || s->stage != Stage::kActive) co_return std::nullopt;
  const Bytes msg = ipmi::encode_ipmi_response(*req, a.cc, a.data);
  ++s->out_seq;
  if (s->out_seq == 0) s->out_seq = 1;
  ipmi::V2Header h;
  h.type = PayloadType::kIpmi;
  h.encrypted = true;
  h.authenticated = true;
  h.session_id = s->console_sid;
  h.sequence = s->out_seq;
  const Bytes iv = ipmi::random_bytes(16);
  Bytes reply = ipmi::encode_v2_packet(h, msg, &s->keys, iv);
  if (closed_caller) {
    log_.debug("ipmi: session closed", {{"session", std::to_string(sid)}});
    sessions_.erase(sid);
  }
  co_return reply;
}

std::optional<Bytes> IpmiBmc::pre_session(ByteView d) {
  // Only the unauthenticated IPMI v1.5 framing: v1.5 sessions are not offered.
  if (d.size() < 5 || d[4] != ipmi::kAuthTypeNone) return std::nullopt;
  auto msg = ipmi::decode_v15_packet(d);
  if (!msg) return std::nullopt;
  auto req = ipmi::decode_ipmi_request(*msg);
  if (!req) return std::nullopt;
  std::optional<Answer> a = pre_session_command(*req);
  if (!a) return std::nullopt;
  return ipmi::encode_v15_packet(ipmi::encode_ipmi_response(*req, a->cc, a->data));
}

std::optional<IpmiBmc::Answer> IpmiBmc::pre_session_command(const ipmi::IpmiRequest& req) const {
  if (req.net_fn != ipmi::kNetFnApp) return std::nullopt;
  Answer a;
  if (req.cmd == ipmi::kCmdGetChannelAuthCaps) {
    // 22.13: [channel | v1.5 auth types (bit 7: v2.0 data follows) | user
    // login status (non-null user names) | extended caps (bit 1: IPMI v2.0)
    // | OEM id (3) | OEM aux].
    if (req.data.size() < 2) return cc_only(kCcLengthInvalid);
    const uint8_t channel = req.data[0] & 0x0F;
    if (channel != 0x0E && channel != kLanChannel) return cc_only(kCcInvalidData);
    const bool extended = (req.data[0] & 0x80) != 0;
    a.data = {kLanChannel, static_cast<uint8_t>(extended ? 0x80 : 0x00), 0x04,
              static_cast<uint8_t>(extended ? 0x02 : 0x00), 0x00, 0x00, 0x00, 0x00};
    return a;
  }
  if (req.cmd == kCmdGetChannelCipherSuites) {
    // 22.15: records "C0h, suite id, auth alg, 40h | integrity, 80h | conf",
    // returned 16 bytes per list index.
    if (req.data.size() < 3) return cc_only(kCcLengthInvalid);
    const uint8_t channel = req.data[0] & 0x0F;
    if (channel != 0x0E && channel != kLanChannel) return cc_only(kCcInvalidData);
    const Bytes records = {0xC0, 0x03, 0x01, 0x41, 0x81, 0xC0, 0x11, 0x03, 0x44, 0x81};
    a.data = {kLanChannel};
    const size_t index = req.data[2] & 0x3F;
    if (req.data[1] == 0x00) {  // payload type IPMI
      for (size_t i = index * 16; i < records.size() && i < index * 16 + 16; ++i) {
        a.data.push_back(records[i]);
      }
    }
    return a;
  }
  return std::nullopt;
}

// ---- Session establishment ---------------------------------------------------------------------

std::optional<Bytes> IpmiBmc::open_session(const Bytes& payload) {
  auto r = ipmi::decode_open_session_request(payload);
  if (!r) return std::nullopt;
  // A retransmitted request gets the answer it already got.
  for (const auto& kv : sessions_) {
    const Session& s = kv.second;
    if (s.stage == Stage::kOpened && s.console_sid == r->console_session_id &&
        s.last_request == payload) {
      return s.last_reply;
    }
  }
  ipmi::OpenSessionResponse rsp;
  rsp.tag = r->tag;
  rsp.console_session_id = r->console_session_id;
  if (r->suite.id == 0) {
    rsp.status = kStatusNoCipherSuiteMatch;
  } else if (r->max_privilege > kPrivAdmin) {
    rsp.status = kStatusInvalidRole;
  } else if (!make_room()) {
    rsp.status = kStatusNoResources;
  }
  if (rsp.status != 0) {
    log_.debug("ipmi: open session refused", {{"status", ipmi::rmcp_status_text(rsp.status)}});
    return unauthenticated(PayloadType::kOpenSessionResponse,
                           ipmi::encode_open_session_response(rsp));
  }
  Session s;
  do {
    s.bmc_sid = random_session_id();
  } while (sessions_.count(s.bmc_sid) > 0);
  s.console_sid = r->console_session_id;
  s.suite = *ipmi::cipher_suite(r->suite.id);
  s.max_privilege = r->max_privilege == 0 ? kPrivAdmin : r->max_privilege;
  s.last_seen = SteadyClock::now();
  rsp.max_privilege = s.max_privilege;
  rsp.bmc_session_id = s.bmc_sid;
  rsp.auth = s.suite.auth;
  rsp.integrity = s.suite.integrity;
  rsp.confidentiality = s.suite.confidentiality;
  s.last_request = payload;
  s.last_reply = unauthenticated(PayloadType::kOpenSessionResponse,
                                 ipmi::encode_open_session_response(rsp));
  Bytes out = s.last_reply;
  sessions_.emplace(s.bmc_sid, std::move(s));
  return out;
}

std::optional<Bytes> IpmiBmc::rakp1(const Bytes& payload) {
  auto r = ipmi::decode_rakp1(payload);
  if (!r) return std::nullopt;
  ipmi::Rakp2 out;
  out.tag = r->tag;
  Session* s = find(r->bmc_session_id);
  if (s == nullptr) {
    out.status = kStatusInvalidSessionId;
    return unauthenticated(PayloadType::kRakp2, ipmi::encode_rakp2(out));
  }
  if (s->stage == Stage::kActive) return std::nullopt;  // a late duplicate
  if (s->stage == Stage::kRakp2Sent && s->last_request == payload) return s->last_reply;
  s->last_seen = SteadyClock::now();
  out.console_session_id = s->console_sid;
  const uint8_t role = r->role & 0x0F;
  if (role == 0 || role > kPrivAdmin || (r->role & 0xE0) != 0) {
    out.status = kStatusInvalidRole;
  } else if (opts_.locked_out || r->username != opts_.user) {
    out.status = kStatusUnauthorizedName;
  } else if (role > s->max_privilege) {
    out.status = kStatusUnauthorizedRole;
  }
  if (out.status != 0) {
    log_.info("ipmi: RAKP 1 refused", {{"user", r->username},
                                       {"status", ipmi::rmcp_status_text(out.status)},
                                       {"locked_out", opts_.locked_out ? "true" : "false"}});
    const uint32_t gone = s->bmc_sid;
    Bytes pkt = unauthenticated(PayloadType::kRakp2, ipmi::encode_rakp2(out));
    sessions_.erase(gone);
    return pkt;
  }
  ipmi::RakpContext& c = s->ctx;
  c.console_session_id = s->console_sid;
  c.bmc_session_id = s->bmc_sid;
  c.console_random = r->console_random;
  const Bytes rc = ipmi::random_bytes(16);
  std::copy(rc.begin(), rc.end(), c.bmc_random.begin());
  c.bmc_guid = opts_.guid;
  c.role = r->role;
  c.username = r->username;
  // Computed with the real password whatever the console holds: a console
  // with a wrong password finds this code wrong and stops here.
  out.bmc_random = c.bmc_random;
  out.bmc_guid = c.bmc_guid;
  out.auth_code = ipmi::rakp2_auth_code(s->suite.auth, ipmi::password_key(opts_.password), c);
  s->max_privilege = role;
  s->stage = Stage::kRakp2Sent;
  s->last_request = payload;
  s->last_reply = unauthenticated(PayloadType::kRakp2, ipmi::encode_rakp2(out));
  return s->last_reply;
}

std::optional<Bytes> IpmiBmc::rakp3(const Bytes& payload) {
  auto r = ipmi::decode_rakp3(payload);
  if (!r) return std::nullopt;
  ipmi::Rakp4 out;
  out.tag = r->tag;
  Session* s = find(r->bmc_session_id);
  if (s == nullptr) {
    out.status = kStatusInvalidSessionId;
    return unauthenticated(PayloadType::kRakp4, ipmi::encode_rakp4(out));
  }
  out.console_session_id = s->console_sid;
  if (s->stage == Stage::kActive) {
    // RAKP 4 was lost and the console asks again.
    if (s->last_request == payload) return s->last_reply;
    return std::nullopt;
  }
  const uint32_t sid = s->bmc_sid;
  if (r->status != 0) {  // the console gave up (e.g. it rejected RAKP 2)
    sessions_.erase(sid);
    return std::nullopt;
  }
  if (s->stage != Stage::kRakp2Sent) {
    out.status = kStatusInvalidSessionId;
    return unauthenticated(PayloadType::kRakp4, ipmi::encode_rakp4(out));
  }
  const ipmi::AuthAlg auth = s->suite.auth;
  const Bytes kuid = ipmi::password_key(opts_.password);
  if (!ipmi::bytes_equal(ipmi::rakp3_auth_code(auth, kuid, s->ctx), r->auth_code)) {
    log_.info("ipmi: RAKP 3 refused (wrong password)", {{"user", s->ctx.username}});
    out.status = kStatusInvalidIntegrityCheck;
    Bytes pkt = unauthenticated(PayloadType::kRakp4, ipmi::encode_rakp4(out));
    sessions_.erase(sid);
    return pkt;
  }
  const Bytes sik = ipmi::session_integrity_key(auth, kuid, s->ctx);
  out.icv = ipmi::rakp4_icv(auth, sik, s->ctx);
  s->keys = ipmi::derive_session_keys(s->suite, sik);
  s->stage = Stage::kActive;
  s->privilege = std::min<uint8_t>(kPrivUser, s->max_privilege);
  s->last_seen = SteadyClock::now();
  s->last_request = payload;
  s->last_reply = unauthenticated(PayloadType::kRakp4, ipmi::encode_rakp4(out));
  log_.debug("ipmi: session active", {{"session", std::to_string(sid)},
                                      {"suite", std::to_string(s->suite.id)}});
  return s->last_reply;
}

// ---- Commands ----------------------------------------------------------------------------------

IpmiBmc::Answer IpmiBmc::set_privilege(Session& s, const ipmi::IpmiRequest& req) const {
  if (req.data.empty()) return cc_only(kCcLengthInvalid);
  const uint8_t level = req.data[0] & 0x0F;
  if (level == 0) return Answer{kCcOk, {s.privilege}};
  if (level < kPrivUser || level > kPrivAdmin) return cc_only(kCcPrivilegeNotAvailable);
  if (level > s.max_privilege) return cc_only(kCcPrivilegeExceedsLimit);
  s.privilege = level;
  return Answer{kCcOk, {level}};
}

IpmiBmc::Answer IpmiBmc::close_session(uint32_t caller_sid, const ipmi::IpmiRequest& req,
                                       bool& closed_caller) {
  if (req.data.size() < 4) return cc_only(kCcLengthInvalid);
  const uint32_t target = get_u32le(req.data, 0);
  Session* t = target == 0 ? nullptr : find(target);
  if (t == nullptr) return cc_only(kCcInvalidSessionId);
  if (target == caller_sid) {
    closed_caller = true;  // erased once the reply is sealed with its keys
    return cc_only(kCcOk);
  }
  Session* caller = find(caller_sid);
  if (caller == nullptr || caller->privilege < kPrivAdmin) {
    return cc_only(kCcInsufficientPrivilege);
  }
  sessions_.erase(target);
  return cc_only(kCcOk);
}

asio::awaitable<IpmiBmc::Answer> IpmiBmc::command(uint32_t bmc_sid, const ipmi::IpmiRequest& req) {
  Session* s = find(bmc_sid);
  if (s == nullptr) co_return cc_only(kCcUnspecified);
  const uint8_t privilege = s->privilege;
  if (req.net_fn == ipmi::kNetFnApp) {
    if (req.cmd == ipmi::kCmdGetDeviceId) co_return device_id_answer();
    if (req.cmd == ipmi::kCmdSetSessionPrivilege) co_return set_privilege(*s, req);
    std::optional<Answer> pre = pre_session_command(req);
    if (pre) co_return *pre;
    co_return cc_only(kCcInvalidCommand);
  }
  if (req.net_fn == ipmi::kNetFnChassis) {
    if (req.cmd == ipmi::kCmdGetChassisStatus) {
      Answer a = co_await chassis_status();
      co_return a;
    }
    if (req.cmd == ipmi::kCmdChassisControl) {
      if (privilege < kPrivOperator) co_return cc_only(kCcInsufficientPrivilege);
      Answer a = co_await chassis_control(req);
      co_return a;
    }
    if (req.cmd == ipmi::kCmdSetBootOptions) {
      if (privilege < kPrivOperator) co_return cc_only(kCcInsufficientPrivilege);
      Answer a = co_await set_boot_options(req);
      co_return a;
    }
    if (req.cmd == ipmi::kCmdGetBootOptions) {
      Answer a = co_await get_boot_options(req);
      co_return a;
    }
  }
  co_return cc_only(kCcInvalidCommand);
}

asio::awaitable<IpmiBmc::Answer> IpmiBmc::chassis_status() {
  auto st = co_await backend_.state(machine_id_);
  if (!st) {
    log_.warn("ipmi: chassis status failed", {{"error", st.error().message}});
    co_return cc_only(kCcUnspecified);
  }
  co_return chassis_status_answer(st->powered_on);
}

asio::awaitable<IpmiBmc::Answer> IpmiBmc::chassis_control(const ipmi::IpmiRequest& req) {
  if (req.data.empty()) co_return cc_only(kCcLengthInvalid);
  const uint8_t control = req.data[0] & 0x0F;
  std::string reset_type;
  if (control == 0x00) reset_type = "ForceOff";
  else if (control == 0x01) reset_type = "On";
  else if (control == 0x02) reset_type = "PowerCycle";
  else if (control == 0x03) reset_type = "ForceRestart";
  else if (control == 0x04) reset_type = "Nmi";
  else if (control == 0x05) reset_type = "GracefulShutdown";
  else co_return cc_only(kCcInvalidData);
  Status r = co_await backend_.reset(machine_id_, reset_type);
  if (!r) {
    log_.warn("ipmi: chassis control failed",
              {{"reset_type", reset_type}, {"error", r.error().message}});
    co_return cc_only(r.error().code == Code::kInvalidArgument ? kCcInvalidData : kCcUnspecified);
  }
  log_.info("ipmi: chassis control", {{"system", machine_id_}, {"reset_type", reset_type}});
  co_return cc_only(kCcOk);
}

asio::awaitable<IpmiBmc::Answer> IpmiBmc::set_boot_options(const ipmi::IpmiRequest& req) {
  if (req.data.empty()) co_return cc_only(kCcLengthInvalid);
  const uint8_t param = req.data[0] & 0x7F;
  const size_t len = req.data.size() - 1;  // parameter data bytes
  if (param == ipmi::kBootParamSetInProgress) {
    if (len != 1) co_return cc_only(kCcLengthInvalid);
    set_in_progress_ = req.data[1] & 0x03;
    co_return cc_only(kCcOk);
  }
  if (param == ipmi::kBootParamFlagValidClearing) {
    if (len != 1) co_return cc_only(kCcLengthInvalid);
    valid_bit_clearing_ = req.data[1] & 0x1F;
    co_return cc_only(kCcOk);
  }
  if (param == ipmi::kBootParamInfoAck) {
    if (len != 2) co_return cc_only(kCcLengthInvalid);
    const uint8_t mask = req.data[1];
    boot_info_ack_ = static_cast<uint8_t>((boot_info_ack_ & ~mask) | (req.data[2] & mask));
    co_return cc_only(kCcOk);
  }
  if (param != ipmi::kBootParamBootFlags) co_return cc_only(kCcParamNotSupported);
  if (len != 5) co_return cc_only(kCcLengthInvalid);
  const uint8_t b1 = req.data[1];
  const uint8_t selector = req.data[2] & 0x3C;
  std::optional<std::string> target = target_for_selector(selector);
  if (!target) co_return cc_only(kCcInvalidData);
  BootOverride boot;
  const bool valid = (b1 & ipmi::kBootFlagValid) != 0;
  boot.target = valid ? *target : std::string("None");
  if (!valid || boot.target == "None") {
    boot.enabled = "Disabled";
  } else if ((b1 & ipmi::kBootFlagPersistent) != 0) {
    boot.enabled = "Continuous";
  } else {
    boot.enabled = "Once";
  }
  boot.mode = (b1 & ipmi::kBootFlagEfi) != 0 ? "UEFI" : "Legacy";
  Status r = co_await backend_.set_boot(machine_id_, boot);
  if (!r) {
    log_.warn("ipmi: set boot flags failed", {{"target", boot.target}, {"error", r.error().message}});
    co_return cc_only(r.error().code == Code::kInvalidArgument ? kCcInvalidData : kCcUnspecified);
  }
  log_.info("ipmi: boot override", {{"system", machine_id_},
                                    {"target", boot.target},
                                    {"enabled", boot.enabled},
                                    {"mode", boot.mode}});
  co_return cc_only(kCcOk);
}

asio::awaitable<IpmiBmc::Answer> IpmiBmc::get_boot_options(const ipmi::IpmiRequest& req) {
  if (req.data.size() < 3) co_return cc_only(kCcLengthInvalid);
  const uint8_t param = req.data[0] & 0x7F;
  if (param == ipmi::kBootParamSetInProgress) co_return boot_param_answer(param, set_in_progress_);
  if (param == ipmi::kBootParamFlagValidClearing) {
    co_return boot_param_answer(param, valid_bit_clearing_);
  }
  if (param == ipmi::kBootParamInfoAck) co_return boot_param_answer(param, 0x00, boot_info_ack_);
  if (param != ipmi::kBootParamBootFlags) co_return cc_only(kCcParamNotSupported);
  auto st = co_await backend_.state(machine_id_);
  if (!st) co_return cc_only(kCcUnspecified);
  co_return boot_flags_answer(st->boot);
}

}  // namespace kiln::vbmc
