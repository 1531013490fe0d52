#pragma once
// The Redfish driver: power, management (verify, boot device) and inspection
// of bare-metal servers through their BMC's Redfish service.
//
// The driver keeps one RedfishClient per BMC (origin + user) with at most one
// Redfish session, reused across calls and nodes that share a BMC. Calls to
// one BMC run one at a time on that BMC's strand (BMCs handle concurrency
// badly and the session state is per BMC); calls to different BMCs run
// concurrently. Every BMC's client speaks through one HttpClient: one TLS
// context per trust setting, at most `max_idle_connections` idle connections
// over all BMCs (by default one per BMC up to a share of the descriptor
// limit), and the last TLS session of each BMC, so that the next call to a
// BMC whose connection was closed resumes it instead of a full handshake.
// The Redfish sessions (X-Auth-Token) are kept whatever happens to the
// connections. When the Driver is destroyed, every open session is
// DELETEd (best effort, bounded by `logout_timeout`) on a private
// io_context, so destroy it after its operations have finished.
//
// Node fields used: bmc.address ("https://host[:port]" or "host[:port]",
// https and port 443 by default; any path is ignored, the service root is
// always /redfish/v1/), bmc.username, the decrypted password,
// bmc.system_id (optional: which ComputerSystem; see discovery.h),
// bmc.verify_tls, boot_mode ("uefi" | "bios"), and bmc.options, which
// override RedfishDriverOptions per node:
//   {"ca_file": PEM path, "request_timeout_s": 1..600, "power_timeout_s": 1..3600,
//    "poll_interval_ms": 50..60000, "pxe_target": "Pxe" | "UefiHttp"}
//
// Errors (as values, never thrown): kInvalidArgument with a field pointer
// from validate(); kUnauthenticated when the BMC refuses the credentials;
// kTimeout when the BMC does not answer in time or a power state is not
// reached; kUnprocessable when the BMC does not allow what is asked (a reset
// type, a boot target), naming what it allows; kNotFound when the system is
// not there; kDriverError carrying the BMC's own messages otherwise.

#include <chrono>
#include <memory>

#include <boost/asio/any_io_executor.hpp>

#include "common/http/client.h"
#include "common/log.h"
#include "drivers/driver.h"

namespace kiln {

// A quarter of the process's descriptor soft limit, within [64, 16384]: what
// RedfishDriverOptions::max_idle_connections is unless set.
std::size_t default_max_idle_connections();

struct RedfishDriverOptions {
  // One HTTP exchange. Some BMCs take several seconds for big resources
  // (Supermicro's Managers/1 took 5.8 s when captured), so be generous.
  std::chrono::milliseconds request_timeout{30000};
  // A whole call that does no power polling: verify, get power, boot device.
  std::chrono::milliseconds command_deadline{120000};
  // Inspection walks dozens of resources; on a slow BMC that takes minutes.
  std::chrono::milliseconds inspect_deadline{600000};
  // How long set_power_state waits for the state (graceful shutdowns are slow).
  std::chrono::milliseconds power_timeout{60000};
  // Gap between PowerState reads while waiting.
  std::chrono::milliseconds poll_interval{1000};
  // Bound on DELETE-ing all sessions when the driver is destroyed.
  std::chrono::milliseconds logout_timeout{3000};
  // Idle connections kept over all BMCs; the least recently used is closed
  // first. An idle TLS connection holds about 20 KiB (common/http/
  // tls_client_stream.h), so one per BMC costs about 200 MiB at 10,000 BMCs
  // and spares each BMC a TLS handshake per power sweep (about 0.65 ms of
  // CPU each with OpenSSL 3.0, and as much again on the BMC). The default
  // is a quarter of the descriptor limit when the options are made (kilnd
  // raises its soft limit to the hard one first), at least 64 and at most
  // 16,384. 0 = one per BMC, unbounded.
  std::size_t max_idle_connections = default_max_idle_connections();
  // How long an idle connection is kept: longer than power sync's 60 s
  // interval, so a sweep finds the last one's connections open. A BMC that
  // closes one sooner is noticed when it is next taken and costs a resumed
  // handshake.
  std::chrono::seconds idle_timeout{300};
  // TLS sessions kept for resumption, one per BMC (a few KiB each): enough for
  // a large fleet. 0 = full handshakes only.
  std::size_t max_tls_sessions = 16384;
  // Reply bodies of this many bytes or more are parsed off the I/O threads
  // (drivers/redfish/body_parser.h). nlohmann::json parses about 60 MB/s, so
  // 32 KiB is about half a millisecond of an I/O thread; below that the two
  // hops to the parser's thread and back cost more than they spare.
  std::size_t parse_inline_limit = 32 * 1024;
  // The largest reply body taken from a BMC; a longer one fails the call
  // (kPayloadTooLarge, "response body too large"). A sweep has hundreds of
  // calls in flight, so this is what a broken or hostile BMC can make each
  // of them hold. Real BMCs' largest answers (a system with $expand, a log
  // collection page) are a few MiB.
  std::size_t max_response_bytes = std::size_t{16} << 20;
};

// Builds the "redfish" driver with power, management and inspect. All I/O
// runs on `ex`. Never fails.
std::unique_ptr<Driver> make_redfish_driver(boost::asio::any_io_executor ex,
                                            RedfishDriverOptions opts, Logger log);

// What a driver made by make_redfish_driver holds and has done, for tests and
// benchmarks; all zero for any other driver. Thread-safe.
struct RedfishDriverStats {
  http::ClientStats connections;       // idle connections, TLS sessions, resumed handshakes
  uint64_t bodies_parsed_off_thread = 0;  // at least parse_inline_limit bytes
};
RedfishDriverStats redfish_driver_stats(const Driver& driver);

}  // namespace kiln
