#pragma once
// IPMI-over-LAN wire codec: RMCP, the IPMI v1.5 and v2.0 (RMCP+) session
// wrappers, IPMI messages, and the RMCP+ session establishment payloads.
// Pure functions from structs to bytes and back; no I/O, no clocks.
//
// Decoders take untrusted datagrams: every length is checked before it is
// read, and a truncated, oversized, unknown or forged packet is an Error
// value (kInvalidArgument for malformed, kUnauthenticated for a bad MAC),
// never a crash or an out-of-bounds read. Multi-byte fields are little-endian.
//
// Byte layouts (IPMI v2.0 rev 1.1 section numbers):
//
// RMCP header (13.1.3, Table 13-2), 4 bytes:
//   [0] version 0x06  [1] reserved 0x00  [2] sequence 0xFF (no RMCP ACK)
//   [3] class: 0x07 IPMI, 0x06 ASF
//
// ASF presence ping (13.2.3, Table 13-4), after the RMCP header (class 0x06):
//   [0..3] IANA 4542 (00 00 11 BE, big-endian)  [4] type 0x80 ping / 0x40 pong
//   [5] message tag  [6] reserved  [7] data length (0 for ping, 16 for pong)
//
// IPMI v1.5 session wrapper (13.6, Table 13-8), used here only pre-session
// (Get Channel Authentication Capabilities) with auth type NONE:
//   [0] auth type 0x00  [1..4] session sequence 0  [5..8] session id 0
//   ([9..24] auth code, only when auth type != NONE)  [n] message length
//   [n+1..] IPMI message
//
// IPMI v2.0 / RMCP+ session wrapper (13.6, Table 13-8):
//   [0]  auth type 0x06 (RMCP+)
//   [1]  payload type: bit 7 encrypted, bit 6 authenticated, bits 5:0 type
//   (OEM payload type 0x02 adds 4 bytes IANA + 2 bytes OEM payload id; unsupported)
//   [2..5]  session id (the receiver's: BMC's id outbound, console's id inbound)
//   [6..9]  session sequence number (0 outside an active session)
//   [10..11] payload length
//   [12..]  payload; when encrypted with AES-CBC-128 (13.29):
//           IV (16) | AES(data | pad 01 02 .. N | N)
//   when authenticated, the integrity trailer (13.28.4, Table 13-8):
//           integrity pad (0xFF x 0..3, so that auth type .. next header is a
//           multiple of 4) | pad length | next header 0x07 | AuthCode (MAC
//           over auth type .. next header, keyed with K1, 12 or 16 bytes)
//
// IPMI message (13.8, Table 13-10 request / 13-11 response):
//   request:  rsAddr | netFn<<2 | rsLUN | checksum1 | rqAddr | rqSeq<<2 | rqLUN
//             | cmd | data... | checksum2
//   response: rqAddr | netFn<<2 | rqLUN | checksum1 | rsAddr | rqSeq<<2 | rsLUN
//             | cmd | completion code | data... | checksum2
//   checksum = two's complement of the sum of the covered bytes (sum == 0 mod 256);
//   checksum1 covers bytes 0..1, checksum2 covers byte 3 .. last data byte.
//
// Open Session Request (13.17, Table 13-9 payload 0x10), 32 bytes:
//   [0] message tag [1] requested max privilege (0 = highest matching)
//   [2..3] reserved [4..7] console session id
//   [8..15]  authentication payload: 00 | 00 00 | 08 | alg | 00 00 00
//   [16..23] integrity payload:      01 | 00 00 | 08 | alg | 00 00 00
//   [24..31] confidentiality payload: 02 | 00 00 | 08 | alg | 00 00 00
// Open Session Response (13.18, payload 0x11), 36 bytes (8 when status != 0):
//   [0] tag [1] RMCP+ status code [2] max privilege [3] reserved
//   [4..7] console session id [8..11] BMC session id [12..35] the three
//   algorithm payloads as above
// RAKP Message 1 (13.20, payload 0x12), 28 + name length:
//   [0] tag [1..3] reserved [4..7] BMC session id [8..23] console random Rm
//   [24] requested role: bits 3:0 privilege, bit 4 name-only lookup
//   [25..26] reserved [27] user name length (0..16) [28..] user name
// RAKP Message 2 (13.21, payload 0x13), 40 + auth code (20 SHA1 / 32 SHA256):
//   [0] tag [1] status [2..3] reserved [4..7] console session id
//   [8..23] BMC random Rc [24..39] BMC GUID [40..] key exchange auth code
// RAKP Message 3 (13.22, payload 0x14), 8 + auth code:
//   [0] tag [1] status [2..3] reserved [4..7] BMC session id [8..] auth code
// RAKP Message 4 (13.23, payload 0x15), 8 + ICV (12 SHA1 / 16 SHA256):
//   [0] tag [1] status [2..3] reserved [4..7] console session id [8..] ICV

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"
#include "drivers/ipmi/rmcpplus_crypto.h"

namespace kiln::ipmi {

// Largest datagram we accept or build. Real IPMI LAN packets stay far below
// (an IPMI message carries at most ~255 data bytes); anything larger is
// rejected as oversized.
inline constexpr size_t kMaxDatagram = 1024;

inline constexpr uint8_t kRmcpVersion = 0x06;
inline constexpr uint8_t kRmcpSeqNoAck = 0xFF;
inline constexpr uint8_t kRmcpClassAsf = 0x06;
inline constexpr uint8_t kRmcpClassIpmi = 0x07;

inline constexpr uint8_t kAuthTypeNone = 0x00;
inline constexpr uint8_t kAuthTypeRmcpPlus = 0x06;

inline constexpr uint8_t kBmcAddress = 0x20;       // rsAddr of the BMC
inline constexpr uint8_t kRemoteConsoleSwid = 0x81; // rqAddr for remote consoles

enum class PayloadType : uint8_t {
  kIpmi = 0x00,
  kOpenSessionRequest = 0x10,
  kOpenSessionResponse = 0x11,
  kRakp1 = 0x12,
  kRakp2 = 0x13,
  kRakp3 = 0x14,
  kRakp4 = 0x15,
};

// Privilege levels (Table 6-4 / 22.13).
enum class Privilege : uint8_t { kCallback = 1, kUser = 2, kOperator = 3, kAdministrator = 4 };
// RAKP1 role byte bit 4: look the user up by name only (not name + privilege).
inline constexpr uint8_t kNameOnlyLookup = 0x10;

// ---- RMCP / ASF -----------------------------------------------------------

// Builds an ASF Presence Ping (RMCP class ASF) with `tag`.
Bytes encode_asf_ping(uint8_t tag);
struct AsfPong {
  uint8_t tag = 0;
  bool ipmi_supported = false;  // supported entities bit 7
};
Result<AsfPong> decode_asf_pong(ByteView datagram);

// ---- IPMI messages ----------------------------------------------------------

// Two's complement checksum of `bytes` (13.8).
uint8_t ipmi_checksum(ByteView bytes);

struct IpmiRequest {
  uint8_t net_fn = 0;
  uint8_t cmd = 0;
  uint8_t rq_seq = 0;  // 6 bits
  Bytes data;
  uint8_t rs_addr = kBmcAddress;
  uint8_t rq_addr = kRemoteConsoleSwid;
};

struct IpmiResponse {
  uint8_t net_fn = 0;  // the response netFn (request netFn | 1)
  uint8_t cmd = 0;
  uint8_t rq_seq = 0;
  uint8_t completion_code = 0;
  Bytes data;  // after the completion code
};

Bytes encode_ipmi_request(const IpmiRequest& req);
// kInvalidArgument on truncation (< 8 bytes), oversize, or a bad checksum.
Result<IpmiResponse> decode_ipmi_response(ByteView msg);
// Decodes a request (used by tests and by a BMC-side reader).
Result<IpmiRequest> decode_ipmi_request(ByteView msg);

// ---- IPMI v1.5 session wrapper (pre-session only) ------------------------------

// RMCP header + v1.5 session header with auth type NONE + `ipmi_msg`.
Bytes encode_v15_packet(ByteView ipmi_msg);
// Returns the IPMI message inside an RMCP / v1.5 datagram with auth type NONE.
Result<Bytes> decode_v15_packet(ByteView datagram);

// ---- IPMI v2.0 / RMCP+ session wrapper -------------------------------------

struct V2Header {
  PayloadType type = PayloadType::kIpmi;
  bool encrypted = false;
  bool authenticated = false;
  uint32_t session_id = 0;
  uint32_t sequence = 0;
};

struct V2Packet {
  V2Header header;
  Bytes payload;  // decrypted when the packet was encrypted
};

// Builds RMCP + v2.0 session header + payload (+ trailer). When
// header.encrypted, `keys` must be set and `iv` 16 bytes; when
// header.authenticated, `keys` must be set. Pre-session packets pass no keys.
Bytes encode_v2_packet(const V2Header& header, ByteView payload, const SessionKeys* keys,
                       ByteView iv = {});

// Parses a datagram. When `keys` is given (an active session), an
// authenticated packet's MAC is verified (kUnauthenticated on mismatch) and an
// encrypted payload decrypted; a packet flagged encrypted or authenticated
// without keys is kInvalidArgument. The caller decides whether an
// unauthenticated packet is acceptable in its state.
Result<V2Packet> decode_v2_packet(ByteView datagram, const SessionKeys* keys);

// Peeks at a datagram: true when it is RMCP class IPMI with auth type 0x06.
bool is_v2_packet(ByteView datagram);

// ---- RMCP+ session establishment ------------------------------------------------

struct OpenSessionRequest {
  uint8_t tag = 0;
  uint8_t max_privilege = static_cast<uint8_t>(Privilege::kAdministrator);
  uint32_t console_session_id = 0;
  CipherSuite suite;
};
Bytes encode_open_session_request(const OpenSessionRequest& r);

struct OpenSessionResponse {
  uint8_t tag = 0;
  uint8_t status = 0;  // RMCP+ status code (Table 13-15), 0 = ok
  uint8_t max_privilege = 0;
  uint32_t console_session_id = 0;
  uint32_t bmc_session_id = 0;
  AuthAlg auth = AuthAlg::kNone;
  IntegrityAlg integrity = IntegrityAlg::kNone;
  ConfidentialityAlg confidentiality = ConfidentialityAlg::kNone;
};
// A response with a non-zero status may stop right after the status byte
// (ipmi_sim sends 2 bytes); the missing fields are then left zero / kNone. kInvalidArgument for truncation/oversize or
// malformed algorithm payload headers.
Result<OpenSessionResponse> decode_open_session_response(ByteView payload);
Bytes encode_open_session_response(const OpenSessionResponse& r);  // for tests

struct Rakp1 {
  uint8_t tag = 0;
  uint32_t bmc_session_id = 0;
  std::array<uint8_t, 16> console_random{};
  uint8_t role = kNameOnlyLookup | static_cast<uint8_t>(Privilege::kAdministrator);
  std::string username;  // at most 16 bytes (asserted)
};
Bytes encode_rakp1(const Rakp1& r);

struct Rakp2 {
  uint8_t tag = 0;
  uint8_t status = 0;
  uint32_t console_session_id = 0;
  std::array<uint8_t, 16> bmc_random{};
  std::array<uint8_t, 16> bmc_guid{};
  Bytes auth_code;
};
// `auth_code_len` is rakp_auth_code_len() of the negotiated algorithm. A
// non-zero status may come without the rest (as few as 2 bytes).
Result<Rakp2> decode_rakp2(ByteView payload, size_t auth_code_len);
Bytes encode_rakp2(const Rakp2& r);  // for tests

struct Rakp3 {
  uint8_t tag = 0;
  uint8_t status = 0;
  uint32_t bmc_session_id = 0;
  Bytes auth_code;
};
Bytes encode_rakp3(const Rakp3& r);

struct Rakp4 {
  uint8_t tag = 0;
  uint8_t status = 0;
  uint32_t console_session_id = 0;
  Bytes icv;
};
Result<Rakp4> decode_rakp4(ByteView payload, size_t icv_len);
Bytes encode_rakp4(const Rakp4& r);  // for tests

// ---- BMC side (kiln-vbmc's IPMI front-end) ---------------------------------------
// The mirror images of the console-side codec above: what a BMC reads
// (requests, Open Session Request, RAKP 1 and 3) and what it writes (the
// responses). Same rules: untrusted input, every length checked.

// Builds the response message to `req`: addresses swapped, netFn | 1, rqSeq
// echoed, then the completion code and `data` (at most 255 bytes, asserted).
Bytes encode_ipmi_response(const IpmiRequest& req, uint8_t completion_code, ByteView data);

// Parses an Open Session Request (exactly 32 bytes). The three algorithm
// numbers land in `suite`; suite.id is 3 or 17 when they spell one of those
// suites, else 0 (the BMC then answers "no cipher suite match").
// kInvalidArgument for truncation, oversize or a malformed algorithm record.
Result<OpenSessionRequest> decode_open_session_request(ByteView payload);

// Parses RAKP Message 1 (28 bytes + user name of 0..16 bytes; the length
// byte must match what follows). kInvalidArgument otherwise.
Result<Rakp1> decode_rakp1(ByteView payload);

// Parses RAKP Message 3 (8 bytes + the auth code; a non-zero status may come
// without one). The auth code is whatever follows; its length is checked
// against the negotiated algorithm by the caller (rakp_auth_code_len).
Result<Rakp3> decode_rakp3(ByteView payload);

// ---- Inbound sequence numbers ------------------------------------------------

// Replay protection for packets the BMC sends in an active session (6.12.13):
// a sliding window of 16. A sequence number is accepted once: when it is
// newer than the highest seen so far (the window slides forward; packets are
// MAC-checked before they get here, so a jump cannot be forged), or when it
// is within the 16 below the highest and not yet seen (reordering). Zero is
// never valid inside a session.
class ReplayWindow {
 public:
  // True (and records it) when `seq` is fresh; false for replays, zero, and
  // numbers more than 16 behind the highest accepted.
  bool accept(uint32_t seq);

 private:
  uint32_t highest_ = 0;
  uint32_t seen_ = 0;  // bit i: highest_ - i was received (bit 0 = highest_)
};

}  // namespace kiln::ipmi
