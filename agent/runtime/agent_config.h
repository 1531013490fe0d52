#pragma once
// What the agent needs to find kilnd and itself: from the kernel command line
// in the deploy ramdisk (kiln.api= kiln.node= kiln.token= kiln.phase=ramdisk),
// from flags in an installed OS (--api URL --phase os).

#include <chrono>
#include <string>
#include <string_view>

#include "common/result.h"

namespace kiln::agent {

enum class AgentPhase { kRamdisk, kOs };
const char* phase_name(AgentPhase p);

struct AgentConfig {
  std::string api_url;      // "http://10.77.0.1:8080" (no trailing slash needed)
  std::string node_id;      // optional hint sent in lookup
  std::string boot_token;   // one-time token (ramdisk phase); never logged
  std::string os_secret;    // the deploy's secret (os phase, agent_seed.h); never logged
  // SHA-256 hex of kilnd's certificate (kiln.tls_sha256 / the seed): the
  // client pins it and refuses plain http. Empty: plain http only.
  std::string tls_sha256;
  AgentPhase phase = AgentPhase::kOs;
  std::string root;         // filesystem prefix for /sys and /proc ("" = host)
  std::string version = "0.1.0";

  // Backoff after network errors: doubles from initial to max.
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_max{30000};
  // The ramdisk cannot recover from a rejected token by itself (only a new
  // boot script mints one), so it retries slowly rather than hammering kilnd.
  std::chrono::milliseconds unauthorized_retry{30000};
  // Bounds on the interval kilnd asks for (it sends heartbeat_interval_s).
  std::chrono::milliseconds min_heartbeat{10};
  std::chrono::milliseconds max_heartbeat{60000};
};

// Fills api_url, node_id, boot_token, tls_sha256 and phase from a kernel command line.
// Errors: kInvalidArgument naming the missing kiln.* argument (kiln.api, and
// kiln.token in the ramdisk phase).
Status apply_kernel_cmdline(std::string_view cmdline, AgentConfig* config);

}  // namespace kiln::agent
