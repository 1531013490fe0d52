#include "drivers/ipmi/wire.h"

#include <cassert>

#include "drivers/ipmi/byte_order.h"

namespace kiln::ipmi {
namespace {

Error malformed_packet(std::string what) { return Error(Code::kInvalidArgument, std::move(what)); }

template <size_t N>
std::array<uint8_t, N> get_array(ByteView b, size_t at) {
  std::array<uint8_t, N> a{};
  for (size_t i = 0; i < N; ++i) a[i] = b[at + i];
  return a;
}

void put_rmcp(Bytes& out, uint8_t cls) {
  out.push_back(kRmcpVersion);
  out.push_back(0x00);
  out.push_back(kRmcpSeqNoAck);
  out.push_back(cls);
}

Status check_rmcp(ByteView d, uint8_t cls) {
  if (d.size() > kMaxDatagram) {
    return malformed_packet("datagram of " + std::to_string(d.size()) + " bytes is oversized");
  }
  if (d.size() < 4) return malformed_packet("datagram shorter than the RMCP header");
  if (d[0] != kRmcpVersion) return malformed_packet("not an RMCP 1.0 datagram");
  if ((d[3] & 0x1F) != cls) return malformed_packet("unexpected RMCP message class");
  return ok_status();
}

void put_alg_payload(Bytes& out, uint8_t payload_type, uint8_t alg) {
  out.push_back(payload_type);
  out.push_back(0);
  out.push_back(0);
  out.push_back(0x08);
  out.push_back(alg);
  out.push_back(0);
  out.push_back(0);
  out.push_back(0);
}

// Validates one 8-byte algorithm payload record and returns its algorithm.
Result<uint8_t> get_alg_payload(ByteView b, size_t at, uint8_t payload_type) {
  if (b[at] != payload_type || b[at + 3] != 0x08) {
    return malformed_packet("malformed algorithm payload in Open Session Response");
  }
  return static_cast<uint8_t>(b[at + 4] & 0x3F);
}

}  // namespace

// ---- RMCP / ASF ---------------------------------------------------------------

Bytes encode_asf_ping(uint8_t tag) {
  Bytes out;
  put_rmcp(out, kRmcpClassAsf);
  for (uint8_t b : {0x00, 0x00, 0x11, 0xBE}) out.push_back(b);  // IANA 4542
  out.push_back(0x80);  // Presence Ping
  out.push_back(tag);
  out.push_back(0x00);
  out.push_back(0x00);  // data length
  return out;
}

Result<AsfPong> decode_asf_pong(ByteView d) {
  if (auto s = check_rmcp(d, kRmcpClassAsf); !s) return s.error();
  if (d.size() < 12) return malformed_packet("ASF message truncated");
  if (d[4] != 0x00 || d[5] != 0x00 || d[6] != 0x11 || d[7] != 0xBE) {
    return malformed_packet("ASF message with a foreign IANA number");
  }
  if (d[8] != 0x40) return malformed_packet("ASF message is not a Presence Pong");
  const size_t len = d[11];
  if (len < 16 || d.size() < 12 + len) return malformed_packet("ASF Presence Pong truncated");
  AsfPong p;
  p.tag = d[9];
  p.ipmi_supported = (d[12 + 8] & 0x80) != 0;  // supported entities
  return p;
}

// ---- IPMI messages --------------------------------------------------------------

uint8_t ipmi_checksum(ByteView bytes) {
  uint8_t sum = 0;
  for (uint8_t b : bytes) sum = static_cast<uint8_t>(sum + b);
  return static_cast<uint8_t>(-sum);
}

Bytes encode_ipmi_request(const IpmiRequest& req) {
  Bytes out;
  out.push_back(req.rs_addr);
  out.push_back(static_cast<uint8_t>(req.net_fn << 2));  // rsLUN 0
  out.push_back(ipmi_checksum(ByteView(out.data(), 2)));
  out.push_back(req.rq_addr);
  out.push_back(static_cast<uint8_t>((req.rq_seq & 0x3F) << 2));  // rqLUN 0
  out.push_back(req.cmd);
  out.insert(out.end(), req.data.begin(), req.data.end());
  out.push_back(ipmi_checksum(ByteView(out.data() + 3, out.size() - 3)));
  return out;
}

namespace {
// Shared checks for both message directions: 7 header bytes + checksum2.
Status check_ipmi_message(ByteView m, size_t min_len) {
  if (m.size() < min_len) return malformed_packet("IPMI message truncated");
  if (m.size() > 3 + 4 + 255 + 1) return malformed_packet("IPMI message oversized");
  if (ipmi_checksum(m.first(2)) != m[2]) return malformed_packet("IPMI header checksum mismatch");
  if (ipmi_checksum(m.subspan(3, m.size() - 4)) != m.back()) {
    return malformed_packet("IPMI data checksum mismatch");
  }
  return ok_status();
}
}  // namespace

Result<IpmiResponse> decode_ipmi_response(ByteView m) {
  if (auto s = check_ipmi_message(m, 8); !s) return s.error();
  IpmiResponse r;
  r.net_fn = static_cast<uint8_t>(m[1] >> 2);
  r.rq_seq = static_cast<uint8_t>(m[4] >> 2);
  r.cmd = m[5];
  r.completion_code = m[6];
  r.data.assign(m.begin() + 7, m.end() - 1);
  return r;
}

Result<IpmiRequest> decode_ipmi_request(ByteView m) {
  if (auto s = check_ipmi_message(m, 7); !s) return s.error();
  IpmiRequest r;
  r.rs_addr = m[0];
  r.net_fn = static_cast<uint8_t>(m[1] >> 2);
  r.rq_addr = m[3];
  r.rq_seq = static_cast<uint8_t>(m[4] >> 2);
  r.cmd = m[5];
  r.data.assign(m.begin() + 6, m.end() - 1);
  return r;
}

// ---- IPMI v1.5 session wrapper ------------------------------------------------------

Bytes encode_v15_packet(ByteView ipmi_msg) {
  assert(ipmi_msg.size() <= 255);
  Bytes out;
  put_rmcp(out, kRmcpClassIpmi);
  out.push_back(kAuthTypeNone);
  put_u32le(out, 0);  // session sequence
  put_u32le(out, 0);  // session id
  out.push_back(static_cast<uint8_t>(ipmi_msg.size()));
  out.insert(out.end(), ipmi_msg.begin(), ipmi_msg.end());
  return out;
}

Result<Bytes> decode_v15_packet(ByteView d) {
  if (auto s = check_rmcp(d, kRmcpClassIpmi); !s) return s.error();
  if (d.size() < 14) return malformed_packet("IPMI v1.5 session header truncated");
  const uint8_t auth_type = d[4];
  if (auth_type == kAuthTypeRmcpPlus) return malformed_packet("expected IPMI v1.5, got an RMCP+ packet");
  const size_t header = auth_type == kAuthTypeNone ? 14 : 30;
  if (d.size() < header) return malformed_packet("IPMI v1.5 session header truncated");
  const size_t len = d[header - 1];
  if (d.size() < header + len) return malformed_packet("IPMI v1.5 message truncated");
  // A trailing legacy pad byte is allowed; anything more is garbage.
  if (d.size() > header + len + 1) return malformed_packet("IPMI v1.5 datagram has trailing bytes");
  return Bytes(d.begin() + static_cast<std::ptrdiff_t>(header),
               d.begin() + static_cast<std::ptrdiff_t>(header + len));
}

// ---- IPMI v2.0 / RMCP+ session wrapper ---------------------------------------------

bool is_v2_packet(ByteView d) {
  return d.size() >= 5 && d[0] == kRmcpVersion && (d[3] & 0x1F) == kRmcpClassIpmi &&
         d[4] == kAuthTypeRmcpPlus;
}

Bytes encode_v2_packet(const V2Header& h, ByteView payload, const SessionKeys* keys, ByteView iv) {
  Bytes body;
  if (h.encrypted) {
    assert(keys != nullptr && iv.size() == 16);
    body = aes_cbc_encrypt(keys->aes_key, iv, payload);
  } else {
    body.assign(payload.begin(), payload.end());
  }
  assert(body.size() <= 0xFFFF);

  Bytes out;
  put_rmcp(out, kRmcpClassIpmi);
  out.push_back(kAuthTypeRmcpPlus);
  out.push_back(static_cast<uint8_t>(static_cast<uint8_t>(h.type) | (h.encrypted ? 0x80 : 0) |
                                     (h.authenticated ? 0x40 : 0)));
  put_u32le(out, h.session_id);
  put_u32le(out, h.sequence);
  put_u16le(out, static_cast<uint16_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());

  if (h.authenticated) {
    assert(keys != nullptr);
    // Pad so that auth type .. next header (session part + pad + 2) is a multiple of 4.
    const size_t session_part = out.size() - 4;
    const size_t pad = (4 - (session_part + 2) % 4) % 4;
    for (size_t i = 0; i < pad; ++i) out.push_back(0xFF);
    out.push_back(static_cast<uint8_t>(pad));
    out.push_back(0x07);  // next header: reserved value the spec requires
    Bytes mac = integrity_mac(keys->suite.integrity, keys->k1,
                              ByteView(out.data() + 4, out.size() - 4));
    out.insert(out.end(), mac.begin(), mac.end());
  }
  return out;
}

Result<V2Packet> decode_v2_packet(ByteView d, const SessionKeys* keys) {
  if (auto s = check_rmcp(d, kRmcpClassIpmi); !s) return s.error();
  if (d.size() < 16) return malformed_packet("RMCP+ session header truncated");
  if (d[4] != kAuthTypeRmcpPlus) return malformed_packet("not an RMCP+ (auth type 6) packet");
  V2Packet p;
  const uint8_t pt = d[5];
  p.header.encrypted = (pt & 0x80) != 0;
  p.header.authenticated = (pt & 0x40) != 0;
  const uint8_t type = pt & 0x3F;
  switch (type) {
    case 0x00: case 0x10: case 0x11: case 0x12: case 0x13: case 0x14: case 0x15:
      p.header.type = static_cast<PayloadType>(type);
      break;
    default:
      return malformed_packet("unsupported RMCP+ payload type " + std::to_string(type));
  }
  p.header.session_id = get_u32le(d, 6);
  p.header.sequence = get_u32le(d, 10);
  const size_t len = get_u16le(d, 14);
  const size_t body_at = 16;
  if (d.size() < body_at + len) return malformed_packet("RMCP+ payload truncated");
  ByteView body = d.subspan(body_at, len);

  if ((p.header.encrypted || p.header.authenticated) && keys == nullptr) {
    return malformed_packet("protected RMCP+ packet outside an active session");
  }

  if (p.header.authenticated) {
    const size_t mac_len = integrity_mac_len(keys->suite.integrity);
    const size_t session_part = 12 + len;
    const size_t pad = (4 - (session_part + 2) % 4) % 4;
    const size_t expected = body_at + len + pad + 2 + mac_len;
    if (d.size() < expected) return malformed_packet("RMCP+ integrity trailer truncated");
    if (d.size() > expected) return malformed_packet("RMCP+ datagram has trailing bytes");
    const size_t pad_len_at = body_at + len + pad;
    if (d[pad_len_at] != pad) return malformed_packet("RMCP+ integrity pad length mismatch");
    if (d[pad_len_at + 1] != 0x07) return malformed_packet("RMCP+ next header is not 0x07");
    Bytes mac = integrity_mac(keys->suite.integrity, keys->k1, d.subspan(4, pad_len_at + 2 - 4));
    if (!bytes_equal(mac, d.subspan(pad_len_at + 2, mac_len))) {
      return Error(Code::kUnauthenticated, "RMCP+ packet integrity check (AuthCode) failed");
    }
  } else if (d.size() != body_at + len) {
    return malformed_packet("RMCP+ datagram has trailing bytes");
  }

  if (p.header.encrypted) {
    auto plain = aes_cbc_decrypt(keys->aes_key, body);
    if (!plain) return plain.error();
    p.payload = std::move(*plain);
  } else {
    p.payload.assign(body.begin(), body.end());
  }
  return p;
}

// ---- RMCP+ session establishment ------------------------------------------------------

Bytes encode_open_session_request(const OpenSessionRequest& r) {
  Bytes out;
  out.push_back(r.tag);
  out.push_back(r.max_privilege);
  out.push_back(0);
  out.push_back(0);
  put_u32le(out, r.console_session_id);
  put_alg_payload(out, 0x00, static_cast<uint8_t>(r.suite.auth));
  put_alg_payload(out, 0x01, static_cast<uint8_t>(r.suite.integrity));
  put_alg_payload(out, 0x02, static_cast<uint8_t>(r.suite.confidentiality));
  return out;
}

Result<OpenSessionResponse> decode_open_session_response(ByteView p) {
  if (p.size() < 2) return malformed_packet("Open Session Response truncated");
  if (p.size() > 36) return malformed_packet("Open Session Response oversized");
  OpenSessionResponse r;
  r.tag = p[0];
  r.status = p[1];
  if (r.status != 0) {
    // Error replies may stop after the status (ipmi_sim sends just 2 bytes).
    if (p.size() >= 3) r.max_privilege = p[2];
    if (p.size() >= 8) r.console_session_id = get_u32le(p, 4);
    return r;
  }
  if (p.size() != 36) return malformed_packet("Open Session Response truncated");
  r.max_privilege = p[2];
  r.console_session_id = get_u32le(p, 4);
  r.bmc_session_id = get_u32le(p, 8);
  auto a = get_alg_payload(p, 12, 0x00);
  if (!a) return a.error();
  auto i = get_alg_payload(p, 20, 0x01);
  if (!i) return i.error();
  auto c = get_alg_payload(p, 28, 0x02);
  if (!c) return c.error();
  r.auth = static_cast<AuthAlg>(*a);
  r.integrity = static_cast<IntegrityAlg>(*i);
  r.confidentiality = static_cast<ConfidentialityAlg>(*c);
  return r;
}

Bytes encode_open_session_response(const OpenSessionResponse& r) {
  Bytes out;
  out.push_back(r.tag);
  out.push_back(r.status);
  out.push_back(r.max_privilege);
  out.push_back(0);
  put_u32le(out, r.console_session_id);
  put_u32le(out, r.bmc_session_id);
  put_alg_payload(out, 0x00, static_cast<uint8_t>(r.auth));
  put_alg_payload(out, 0x01, static_cast<uint8_t>(r.integrity));
  put_alg_payload(out, 0x02, static_cast<uint8_t>(r.confidentiality));
  return out;
}

Bytes encode_rakp1(const Rakp1& r) {
  assert(r.username.size() <= 16);
  Bytes out;
  out.push_back(r.tag);
  out.push_back(0);
  out.push_back(0);
  out.push_back(0);
  put_u32le(out, r.bmc_session_id);
  out.insert(out.end(), r.console_random.begin(), r.console_random.end());
  out.push_back(r.role);
  out.push_back(0);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(r.username.size()));
  out.insert(out.end(), r.username.begin(), r.username.end());
  return out;
}

Result<Rakp2> decode_rakp2(ByteView p, size_t auth_code_len) {
  if (p.size() < 2) return malformed_packet("RAKP Message 2 truncated");
  Rakp2 r;
  r.tag = p[0];
  r.status = p[1];
  if (r.status != 0) {
    // Error replies may stop after the status.
    if (p.size() > 40 + auth_code_len) return malformed_packet("RAKP Message 2 oversized");
    if (p.size() >= 8) r.console_session_id = get_u32le(p, 4);
    return r;
  }
  if (p.size() < 8) return malformed_packet("RAKP Message 2 truncated");
  r.console_session_id = get_u32le(p, 4);
  if (p.size() < 40 + auth_code_len) return malformed_packet("RAKP Message 2 truncated");
  if (p.size() > 40 + auth_code_len) return malformed_packet("RAKP Message 2 oversized");
  r.bmc_random = get_array<16>(p, 8);
  r.bmc_guid = get_array<16>(p, 24);
  r.auth_code.assign(p.begin() + 40, p.end());
  return r;
}

Bytes encode_rakp2(const Rakp2& r) {
  Bytes out;
  out.push_back(r.tag);
  out.push_back(r.status);
  out.push_back(0);
  out.push_back(0);
  put_u32le(out, r.console_session_id);
  out.insert(out.end(), r.bmc_random.begin(), r.bmc_random.end());
  out.insert(out.end(), r.bmc_guid.begin(), r.bmc_guid.end());
  out.insert(out.end(), r.auth_code.begin(), r.auth_code.end());
  return out;
}

Bytes encode_rakp3(const Rakp3& r) {
  Bytes out;
  out.push_back(r.tag);
  out.push_back(r.status);
  out.push_back(0);
  out.push_back(0);
  put_u32le(out, r.bmc_session_id);
  out.insert(out.end(), r.auth_code.begin(), r.auth_code.end());
  return out;
}

Result<Rakp4> decode_rakp4(ByteView p, size_t icv_len) {
  if (p.size() < 2) return malformed_packet("RAKP Message 4 truncated");
  Rakp4 r;
  r.tag = p[0];
  r.status = p[1];
  if (r.status != 0) {
    // Error replies may stop after the status.
    if (p.size() > 8 + icv_len) return malformed_packet("RAKP Message 4 oversized");
    if (p.size() >= 8) r.console_session_id = get_u32le(p, 4);
    return r;
  }
  if (p.size() < 8) return malformed_packet("RAKP Message 4 truncated");
  r.console_session_id = get_u32le(p, 4);
  if (p.size() < 8 + icv_len) return malformed_packet("RAKP Message 4 truncated");
  if (p.size() > 8 + icv_len) return malformed_packet("RAKP Message 4 oversized");
  r.icv.assign(p.begin() + 8, p.end());
  return r;
}

Bytes encode_rakp4(const Rakp4& r) {
  Bytes out;
  out.push_back(r.tag);
  out.push_back(r.status);
  out.push_back(0);
  out.push_back(0);
  put_u32le(out, r.console_session_id);
  out.insert(out.end(), r.icv.begin(), r.icv.end());
  return out;
}

// ---- BMC side -------------------------------------------------------------------------------

Bytes encode_ipmi_response(const IpmiRequest& req, uint8_t completion_code, ByteView data) {
  assert(data.size() <= 255);
  Bytes out;
  out.push_back(req.rq_addr);
  out.push_back(static_cast<uint8_t>((req.net_fn | 1) << 2));  // rqLUN 0
  out.push_back(ipmi_checksum(ByteView(out.data(), 2)));
  out.push_back(req.rs_addr);
  out.push_back(static_cast<uint8_t>((req.rq_seq & 0x3F) << 2));  // rsLUN 0
  out.push_back(req.cmd);
  out.push_back(completion_code);
  out.insert(out.end(), data.begin(), data.end());
  out.push_back(ipmi_checksum(ByteView(out.data() + 3, out.size() - 3)));
  return out;
}

Result<OpenSessionRequest> decode_open_session_request(ByteView p) {
  if (p.size() < 32) return malformed_packet("Open Session Request truncated");
  if (p.size() > 32) return malformed_packet("Open Session Request oversized");
  OpenSessionRequest r;
  r.tag = p[0];
  r.max_privilege = static_cast<uint8_t>(p[1] & 0x0F);
  r.console_session_id = get_u32le(p, 4);
  auto a = get_alg_payload(p, 8, 0x00);
  if (!a) return a.error();
  auto i = get_alg_payload(p, 16, 0x01);
  if (!i) return i.error();
  auto c = get_alg_payload(p, 24, 0x02);
  if (!c) return c.error();
  r.suite.id = 0;
  r.suite.auth = static_cast<AuthAlg>(*a);
  r.suite.integrity = static_cast<IntegrityAlg>(*i);
  r.suite.confidentiality = static_cast<ConfidentialityAlg>(*c);
  for (int id : {3, 17}) {
    auto known = cipher_suite(id);
    if (known && known->auth == r.suite.auth && known->integrity == r.suite.integrity &&
        known->confidentiality == r.suite.confidentiality) {
      r.suite.id = id;
    }
  }
  return r;
}

Result<Rakp1> decode_rakp1(ByteView p) {
  if (p.size() < 28) return malformed_packet("RAKP Message 1 truncated");
  const size_t name_len = p[27];
  if (name_len > 16) return malformed_packet("RAKP Message 1 user name longer than 16 bytes");
  if (p.size() < 28 + name_len) return malformed_packet("RAKP Message 1 user name truncated");
  if (p.size() > 28 + name_len) return malformed_packet("RAKP Message 1 oversized");
  Rakp1 r;
  r.tag = p[0];
  r.bmc_session_id = get_u32le(p, 4);
  r.console_random = get_array<16>(p, 8);
  r.role = p[24];
  r.username.assign(p.begin() + 28, p.begin() + 28 + static_cast<std::ptrdiff_t>(name_len));
  return r;
}

Result<Rakp3> decode_rakp3(ByteView p) {
  if (p.size() < 8) return malformed_packet("RAKP Message 3 truncated");
  // The longest auth code is HMAC-SHA256's 32 bytes.
  if (p.size() > 8 + 32) return malformed_packet("RAKP Message 3 oversized");
  Rakp3 r;
  r.tag = p[0];
  r.status = p[1];
  r.bmc_session_id = get_u32le(p, 4);
  r.auth_code.assign(p.begin() + 8, p.end());
  return r;
}

// ---- Replay window -----------------------------------------------------------------------

bool ReplayWindow::accept(uint32_t seq) {
  if (seq == 0) return false;
  if (highest_ == 0 || seq > highest_) {
    const uint32_t shift = highest_ == 0 ? 32 : seq - highest_;
    seen_ = shift >= 32 ? 0 : (seen_ << shift);
    seen_ |= 1;
    highest_ = seq;
    return true;
  }
  const uint32_t behind = highest_ - seq;
  if (behind >= 16) return false;
  const uint32_t bit = 1u << behind;
  if (seen_ & bit) return false;
  seen_ |= bit;
  return true;
}

}  // namespace kiln::ipmi
