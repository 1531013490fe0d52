#include "agent/runtime/agent_config.h"

#include <sstream>

namespace kiln::agent {

const char* phase_name(AgentPhase p) { return p == AgentPhase::kRamdisk ? "ramdisk" : "os"; }

Status apply_kernel_cmdline(std::string_view cmdline, AgentConfig* config) {
  std::istringstream in{std::string(cmdline)};
  std::string word;
  bool phase_seen = false;
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "kiln.api") config->api_url = value;
    else if (key == "kiln.node") config->node_id = value;
    else if (key == "kiln.token") config->boot_token = value;
    else if (key == "kiln.tls_sha256") config->tls_sha256 = value;
    else if (key == "kiln.phase") {
      if (value == "ramdisk") config->phase = AgentPhase::kRamdisk;
      else if (value == "os") config->phase = AgentPhase::kOs;
      else return Error::invalid("kiln.phase", "must be ramdisk or os, not '" + value + "'");
      phase_seen = true;
    }
  }
  if (!phase_seen && !config->boot_token.empty()) config->phase = AgentPhase::kRamdisk;
  if (config->api_url.empty()) return Error::invalid("kiln.api", "missing from the kernel command line");
  if (config->phase == AgentPhase::kRamdisk && config->boot_token.empty())
    return Error::invalid("kiln.token", "missing from the kernel command line (ramdisk phase)");
  return ok_status();
}

}  // namespace kiln::agent
