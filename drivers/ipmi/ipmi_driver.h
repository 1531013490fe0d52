#pragma once
// The native IPMI v2.0 ("lanplus", RMCP+) driver: power and management
// (verify, boot device) over UDP, no ipmitool subprocess.
//
// The driver keeps one IpmiSession per BMC (address + user) and reuses it
// across calls, so a power sync over thousands of BMCs costs one command per
// node rather than a five-step handshake each time. Calls to the same BMC are
// serialised on that BMC's strand (one IPMI exchange in flight per BMC);
// calls to different BMCs run concurrently. Sessions are closed (Close
// Session, best effort) when the driver is destroyed.
//
// Node fields used: bmc.address "host[:port]" (default port 623),
// bmc.username, the decrypted password, boot_mode ("uefi" sets the EFI boot
// flag), and bmc.options, which override IpmiDriverOptions per node:
//   {"cipher_suite": 3|17, "retries": N (resends after the first try, 0..10),
//    "timeout_ms": N (first per-try timeout, 50..60000),
//    "power_timeout_ms": N (how long set_power_state waits for the state),
//    "min_spacing_ms": N (minimum gap between commands to this BMC)}
//
// Errors: kInvalidArgument with a field pointer from validate(); kTimeout
// when the BMC does not answer or the power state is not reached in time;
// kUnauthenticated when the BMC refuses the user, password or privilege;
// kDriverError with the BMC's completion code text otherwise.

#include <chrono>
#include <memory>

#include <boost/asio/any_io_executor.hpp>

#include "common/log.h"
#include "drivers/driver.h"

namespace kiln {

struct IpmiDriverOptions {
  // Cipher suite when the node does not say: 3 (SHA1) is what every BMC
  // speaks; 17 (SHA256) is stronger but newer firmware only.
  int cipher_suite = 3;
  // First per-try timeout of one UDP exchange; doubles on every resend (up to
  // 8x). One second suits a BMC on a healthy management LAN.
  std::chrono::milliseconds request_timeout{1000};
  // Resends after the first try: 3 gives 1+2+4+8 s before giving up.
  int retries = 3;
  // Deadline of one driver call that needs no power polling (status, verify,
  // boot device), including opening the session.
  std::chrono::milliseconds command_deadline{30000};
  // How long set_power_state waits for the requested state to be observed.
  // Servers take tens of seconds to power off gracefully.
  std::chrono::milliseconds power_timeout{60000};
  // Gap between Get Chassis Status polls while waiting for a power state.
  std::chrono::milliseconds poll_interval{1000};
  // Minimum gap between two commands to one BMC (0 = none); some small BMCs
  // drop packets that arrive back to back.
  std::chrono::milliseconds min_command_spacing{0};
  // Idle sessions older than this are re-opened rather than trusted (BMCs
  // expire sessions after ~60 s of silence).
  std::chrono::milliseconds session_idle_reopen{30000};
  // Set boot option parameter 3 to stop the BMC clearing the boot flags 60 s
  // after they are set when no chassis control follows (what Ironic does).
  bool disable_boot_flag_timeout = true;
};

// Builds the "ipmi" driver with power and management capabilities. All I/O
// runs on `ex` (each BMC on its own strand). The returned Driver owns the
// session cache; destroy it only after its operations have finished (for
// example after the io_context stopped). Never fails.
std::unique_ptr<Driver> make_ipmi_driver(boost::asio::any_io_executor ex, IpmiDriverOptions opts,
                                         Logger log);

}  // namespace kiln
