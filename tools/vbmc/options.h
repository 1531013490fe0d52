#pragma once
// kiln-vbmc's command line, parsed into one plain struct.
//
//   kiln-vbmc (--libvirt-uri URI | --mockup DIR) [--redfish-listen HOST:PORT]
//             [--ipmi-listen HOST:PORT] [--ipmi-system ID]
//             [--user U] [--password P | --password-file F] [--max-sessions N] [--fault-500-rate F]
//             [--latency-ms N] [--allowed-reset-types A,B,..] [--page-size N]
//             [--etag-quirk none|weak|always-412] [--log-level LEVEL]
//             [--settings-object] [--redirect-prefix] [--fault-status PATH=CODE]...
//   kiln-vbmc --fleet N --fleet-manifest FILE [--fleet-protocols ipmi,redfish]
//             [--fleet-address-base 127.2.0.1] [--ipmi-listen HOST:PORT]
//             [--redfish-listen HOST:PORT] [--seed N] [--user U] [--password P | --password-file F]
//             [--fault-latency-ms N] [--fault-latency-fraction F]
//             [--fault-drop-fraction F] [--fault-500-fraction F]
//             [--fault-lockout-fraction F] [--fault-dead-fraction F]
//             [--fault-bmc KIND=I[,J...]]...
//
// In fleet mode only the ports of --ipmi-listen and --redfish-listen are
// used: BMC i lives at --fleet-address-base + i (see fleet_plan.h).
//
// Both "--flag value" and "--flag=value" are accepted (--settings-object and
// --redirect-prefix take no value).

#include <string>
#include <vector>

#include "common/log.h"
#include "common/result.h"
#include "tools/vbmc/fleet_plan.h"
#include "tools/vbmc/redfish_service.h"

namespace kiln::vbmc {

struct VbmcOptions {
  std::string libvirt_uri;  // exactly one of libvirt_uri and mockup_dir
  std::string mockup_dir;
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 0;  // 0 = a free port, printed at start
  RedfishServiceOptions redfish;
  // IPMI lanplus next to Redfish, for one machine (--ipmi-system, default the
  // first one the back-end lists).
  bool ipmi = false;
  std::string ipmi_host = "127.0.0.1";
  uint16_t ipmi_port = 0;  // 0 = a free port, printed at start
  std::string ipmi_system;
  // Fleet mode when fleet.count > 0 (no --libvirt-uri / --mockup then).
  FleetOptions fleet;
  LogLevel log_level = LogLevel::kInfo;
  bool help = false;
};

// Errors: kInvalidArgument with a one-line message naming the flag.
Result<VbmcOptions> parse_vbmc_args(const std::vector<std::string>& args);

const char* vbmc_usage();

}  // namespace kiln::vbmc
