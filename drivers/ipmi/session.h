#pragma once
// One RMCP+ ("lanplus") session with one BMC over UDP.
//
// The session reads top to bottom like the protocol (IPMI v2.0 13.15):
//   Get Channel Authentication Capabilities (IPMI v1.5, pre-session)
//   -> Open Session Request/Response  (agree cipher suite 3 or 17)
//   -> RAKP 1/2 (BMC proves it knows the password: we check its HMAC)
//   -> RAKP 3/4 (we prove it; both derive SIK, K1, K2)
//   -> Set Session Privilege Level (ADMINISTRATOR)
//   -> commands, each signed (K1) and encrypted (K2)
//   -> Close Session.
//
// UDP loses packets, so every exchange is a transaction: send, wait for the
// matching reply until a per-try timeout (doubling from request_timeout up to
// max_request_timeout), resend with a fresh session sequence number, at most
// max_tries times, never past the caller's deadline. Replies that do not
// match (stale retransmits, wrong sequence, failed MAC, replays outside the
// 16-wide inbound window) are dropped and the wait continues. A retransmitted
// handshake step can leave the BMC and us with different nonces; the whole
// handshake is then restarted (a few times, within the deadline).
//
// Sessions are reused across commands. When a command on a reused session
// goes unanswered (the BMC may have expired it), the session is re-opened
// once and the command retried. Consecutive transactions to the BMC are
// spaced by at least min_spacing (small BMCs drop bursts).
//
// Threading: an IpmiSession is not thread-safe. Construct it with a strand
// (or a single-threaded executor) and call it only from coroutines running
// on that executor, one call at a time (the driver serialises per BMC).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>  // Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/log.h"
#include "common/result.h"
#include "drivers/ipmi/commands.h"
#include "drivers/ipmi/rmcpplus_crypto.h"
#include "drivers/ipmi/wire.h"

namespace kiln::ipmi {

namespace asio = boost::asio;
using SteadyClock = std::chrono::steady_clock;

struct BmcEndpoint {
  std::string host;
  uint16_t port = 623;
};
// Parses "host", "host:port", "[v6]" or "[v6]:port". kInvalidArgument on the
// field "/bmc/address" when empty or malformed.
Result<BmcEndpoint> parse_bmc_address(std::string_view address);

struct SessionConfig {
  BmcEndpoint endpoint;
  std::string username;  // at most 16 bytes
  std::string password;  // at most 20 bytes are used (Kuid); never logged
  CipherSuite suite;     // 3 (default) or 17
  Privilege privilege = Privilege::kAdministrator;
  // First per-try timeout; doubles on every resend up to max_request_timeout.
  std::chrono::milliseconds request_timeout{1000};
  std::chrono::milliseconds max_request_timeout{8000};
  // Sends per transaction (first try included).
  int max_tries = 4;
  // Minimum gap between the starts of two transactions to this BMC.
  std::chrono::milliseconds min_spacing{0};
  // A session idle longer than this is re-opened before use instead of being
  // trusted: BMCs expire idle sessions (typically after 60 s), and a silent
  // expiry would otherwise cost a full timeout.
  std::chrono::milliseconds idle_reopen{30000};
};

class IpmiSession {
 public:
  IpmiSession(asio::any_io_executor ex, SessionConfig cfg, Logger log);
  ~IpmiSession();
  IpmiSession(const IpmiSession&) = delete;
  IpmiSession& operator=(const IpmiSession&) = delete;

  const SessionConfig& config() const { return cfg_; }
  bool active() const { return active_; }
  uint32_t bmc_session_id() const { return bmc_sid_; }

  // Establishes the session (see the file comment). Errors: kUnauthenticated
  // when the BMC refuses the user or the password is wrong (RAKP2 HMAC
  // mismatch), kTimeout when the BMC does not answer before `deadline`,
  // kDriverError when the BMC refuses otherwise (its status text included),
  // kInvalidArgument for a bad address, username or password length.
  asio::awaitable<Status> open(SteadyClock::time_point deadline);

  // Sends one IPMI request in the session (opening it first when needed) and
  // returns the response, whatever its completion code. On a reused session
  // that times out, re-opens once and retries. Errors as open(), plus
  // kTimeout when the request itself goes unanswered.
  asio::awaitable<Result<IpmiResponse>> command(uint8_t net_fn, uint8_t cmd, Bytes data,
                                                SteadyClock::time_point deadline);

  // Sends Close Session (one try, best effort) and forgets the keys.
  asio::awaitable<void> close(SteadyClock::time_point deadline);
  // Synchronous best-effort Close Session datagram, for shutdown when no
  // coroutine can run any more. Does not wait for the answer.
  void close_now();

 private:
  // Sends build() and waits for a datagram match() accepts (nullopt = not
  // ours, keep waiting), resending with backoff; max_tries <= 0 means
  // cfg_.max_tries.
  template <typename T, typename Build, typename Match>
  asio::awaitable<Result<T>> transact(std::string_view what, Build& build, Match& match,
                                      SteadyClock::time_point deadline, int max_tries = 0);
  asio::awaitable<Status> connect(SteadyClock::time_point deadline);
  asio::awaitable<Status> handshake(SteadyClock::time_point deadline);
  asio::awaitable<Result<IpmiResponse>> session_request(uint8_t net_fn, uint8_t cmd,
                                                        const Bytes& data,
                                                        SteadyClock::time_point deadline,
                                                        int max_tries = 0);
  // Waits for one datagram until `until`; kTimeout when none arrived.
  asio::awaitable<Result<size_t>> receive_until(SteadyClock::time_point until);
  asio::awaitable<void> sleep_until(SteadyClock::time_point until);
  Bytes build_session_packet(const Bytes& ipmi_msg);
  void reset_session_state();

  SessionConfig cfg_;
  Logger log_;
  asio::ip::udp::socket socket_;
  asio::steady_timer recv_timer_;
  asio::steady_timer sleep_timer_;
  uint64_t recv_generation_ = 0;
  bool connected_ = false;
  Bytes rx_;

  bool active_ = false;
  // Set by handshake() when its failure may clear up on a fresh handshake.
  bool handshake_retryable_ = false;
  uint32_t console_sid_ = 0;
  uint32_t bmc_sid_ = 0;
  uint32_t out_seq_ = 0;
  uint8_t rq_seq_ = 0;
  SessionKeys keys_;
  ReplayWindow window_;
  SteadyClock::time_point last_send_{};
  SteadyClock::time_point last_used_{};
};

}  // namespace kiln::ipmi
