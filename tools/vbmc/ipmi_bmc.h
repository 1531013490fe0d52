#pragma once
// IpmiBmc: the BMC side of IPMI v2.0 "lanplus" (RMCP+) for one machine of a
// MachineBackend. Datagram in, datagram out: it never sees a socket
// (IpmiListener is the transport), so the same object serves a libvirt
// domain, a captured Redfish tree or one BMC of a fleet.
//
// What a console sees, in protocol order (IPMI v2.0 rev 1.1 section 13.15):
//   Get Channel Authentication Capabilities / Get Channel Cipher Suites
//     (pre-session, IPMI v1.5 or unauthenticated v2.0 framing);
//   Open Session: cipher suites 3 (HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128) and
//     17 (HMAC-SHA256, HMAC-SHA256-128, AES-CBC-128) are offered; any other
//     algorithm triple gets status 0x11 "no cipher suite match";
//   RAKP 1 -> 2: the user name must be the configured one (else 0x0D
//     "unauthorized name"); the key exchange code is computed with the real
//     password, so a console holding a wrong password rejects RAKP 2 itself;
//   RAKP 3 -> 4: the console's code is checked (0x0F "invalid integrity check
//     value" when the password was wrong), then both sides hold SIK, K1, K2;
//   then every packet must be signed (K1) and encrypted (K2), carry a fresh
//     session sequence number (a 16-wide replay window, as the driver keeps)
//     and is answered signed and encrypted; anything else is dropped silently,
//     as real BMCs do;
//   Close Session.
// Handshake replies are cached per session, so a console's retransmission of
// Open Session, RAKP 1 or RAKP 3 gets the very same answer rather than fresh
// nonces that would break its handshake.
//
// Commands: Get Device ID; Set Session Privilege Level (sessions start at
// USER and may rise to the role asked for in RAKP 1); Get Chassis Status;
// Chassis Control (0 power down -> ForceOff, 1 up -> On, 2 cycle ->
// PowerCycle, 3 hard reset -> ForceRestart, 4 diagnostic interrupt -> Nmi,
// 5 soft shutdown -> GracefulShutdown, on the back-end's reset); Set/Get
// System Boot Options parameters 0 (set in progress), 3 (valid-bit clearing),
// 4 (boot info acknowledge) and 5 (boot flags: device PXE / disk / CD / BIOS
// setup, persistent, EFI), parameter 5 mapped to the back-end's boot
// override. Chassis Control and Set System Boot Options need OPERATOR.
// Anything else answers completion code 0xC1 (invalid command).
//
// The boot flags' 60-second auto-clear (parameter 3) is stored and reported,
// not enforced: the back-end keeps the override until it is changed.
//
// Threading: not thread-safe. One listener calls handle() one datagram at a
// time (each IPMI endpoint is one socket and one receive loop).

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <boost/asio/awaitable.hpp>

#include "common/log.h"
#include "drivers/ipmi/wire.h"
#include "tools/vbmc/backend.h"

namespace kiln::vbmc {

using SteadyClock = std::chrono::steady_clock;

struct IpmiBmcOptions {
  std::string user = "admin";
  std::string password = "password";  // at most 20 bytes are used (Kuid)
  // Sessions held at once (being opened or active). Real BMCs allow 4..32;
  // past this, idle sessions are evicted, then Open Session gets status 0x01.
  std::size_t max_sessions = 16;
  // A session silent this long is forgotten (the spec's default is 60 s).
  std::chrono::seconds session_timeout{60};
  // Fault injection: the account is locked (as after too many wrong
  // passwords): RAKP 1 is refused with 0x0D "unauthorized name" whatever the
  // credentials.
  bool locked_out = false;
  // The system GUID mixed into RAKP 2 and 4.
  std::array<uint8_t, 16> guid{};
};

class IpmiBmc {
 public:
  // `backend` must outlive the object; `machine_id` is the machine it fronts.
  IpmiBmc(MachineBackend& backend, std::string machine_id, IpmiBmcOptions opts, Logger log);

  // Handles one datagram from a console (untrusted) and returns the datagram
  // to send back, or nullopt when there is nothing to answer (malformed, not
  // for an active session, a replay, a failed MAC). Back-end calls happen in
  // here; their errors become completion codes (0xCC bad value, 0xFF other).
  // `datagram` must stay valid until the coroutine finishes.
  asio::awaitable<std::optional<ipmi::Bytes>> handle(ipmi::ByteView datagram);

  const std::string& machine_id() const { return machine_id_; }
  std::size_t session_count() const { return sessions_.size(); }
  std::size_t active_session_count() const;

 // What one command answers (public for the answer builders in the .cc).
  struct Answer {
    uint8_t cc = 0;
    ipmi::Bytes data;
  };

 private:
  enum class Stage { kOpened, kRakp2Sent, kActive };
  struct Session {
    uint32_t bmc_sid = 0;
    uint32_t console_sid = 0;
    ipmi::CipherSuite suite;
    Stage stage = Stage::kOpened;
    uint8_t max_privilege = 4;  // ceiling from Open Session and RAKP 1
    uint8_t privilege = 2;      // current; sessions start at USER
    ipmi::RakpContext ctx;
    ipmi::SessionKeys keys;
    ipmi::ReplayWindow window;
    uint32_t out_seq = 0;
    SteadyClock::time_point last_seen;
    ipmi::Bytes last_request;  // the last handshake payload and our answer,
    ipmi::Bytes last_reply;    // replayed verbatim on a retransmission
  };
  std::optional<ipmi::Bytes> pre_session(ipmi::ByteView datagram);
  std::optional<Answer> pre_session_command(const ipmi::IpmiRequest& req) const;
  std::optional<ipmi::Bytes> open_session(const ipmi::Bytes& payload);
  std::optional<ipmi::Bytes> rakp1(const ipmi::Bytes& payload);
  std::optional<ipmi::Bytes> rakp3(const ipmi::Bytes& payload);
  asio::awaitable<Answer> command(uint32_t bmc_sid, const ipmi::IpmiRequest& req);
  asio::awaitable<Answer> chassis_control(const ipmi::IpmiRequest& req);
  asio::awaitable<Answer> set_boot_options(const ipmi::IpmiRequest& req);
  asio::awaitable<Answer> get_boot_options(const ipmi::IpmiRequest& req);
  asio::awaitable<Answer> chassis_status();
  Answer set_privilege(Session& s, const ipmi::IpmiRequest& req) const;
  Answer close_session(uint32_t caller_sid, const ipmi::IpmiRequest& req, bool& closed_caller);
  Session* find(uint32_t bmc_sid);
  bool make_room();

  MachineBackend& backend_;
  std::string machine_id_;
  IpmiBmcOptions opts_;
  Logger log_;
  std::map<uint32_t, Session> sessions_;  // by BMC session id
  // Boot option parameters kept as written (0, 3, 4).
  uint8_t set_in_progress_ = 0;
  uint8_t valid_bit_clearing_ = 0;
  uint8_t boot_info_ack_ = 0;
};

}  // namespace kiln::vbmc
