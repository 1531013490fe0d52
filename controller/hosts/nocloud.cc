#include "controller/hosts/nocloud.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "controller/tenancy/config_drive.h"

namespace kiln {
namespace {

// YAML double-quoted scalar (JSON strings are valid YAML).
std::string yaml_quoted(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

std::vector<std::string> node_ssh_keys(const Node& node) {
  std::vector<std::string> out;
  const nlohmann::json& o = node.bmc.options;
  if (o.is_object() && o.contains("ssh_keys") && o["ssh_keys"].is_array())
    for (const auto& k : o["ssh_keys"])
      if (k.is_string()) out.push_back(k.get<std::string>());
  return out;
}

std::vector<std::string> merged_ssh_keys(std::vector<std::string> keys, const std::vector<std::string>& more) {
  for (const std::string& k : more)
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

std::string nocloud_meta_data(const Node& node) {
  std::string hostname = node.name.empty() ? "kiln-" + node.id.substr(0, 8) : node.name;
  return "instance-id: " + yaml_quoted(node.id) + "\nlocal-hostname: " + yaml_quoted(hostname) + "\n";
}

std::string nocloud_agent_env(const Node& node, const NoCloudAgent& agent) {
  std::string env = "KILN_API=" + agent.boot_url + "\nKILN_NODE=" + node.id + "\nKILN_PHASE=os\n";
  if (!agent.os_secret.empty()) env += "KILN_OS_SECRET=" + agent.os_secret + "\n";
  if (!agent.tls_sha256.empty()) env += "KILN_TLS_SHA256=" + agent.tls_sha256 + "\n";
  return env;
}

std::string nocloud_user_data(const Node& node, const std::vector<std::string>& ssh_keys,
                              const NoCloudAgent& agent, const std::string& tenant_user_data) {
  std::string y = "#cloud-config\n";
  y += "ssh_authorized_keys:\n";
  if (ssh_keys.empty()) y.replace(y.size() - 1, 1, " []\n");
  for (const std::string& k : ssh_keys) y += "  - " + yaml_quoted(k) + "\n";
  y += phone_home_cloud_config(agent.phone_home_url);
  y += "write_files:\n";
  // 0600: the file holds the os secret.
  y += "  - path: /etc/kiln/agent.env\n    permissions: '0600'\n    content: |\n";
  std::string env = nocloud_agent_env(node, agent);
  std::size_t start = 0;
  while (start < env.size()) {
    std::size_t end = env.find('\n', start);
    y += "      " + env.substr(start, end - start) + "\n";
    start = end + 1;
  }
  y += "runcmd:\n";
  y += "  - [sh, -c, 'systemctl enable --now kiln-agent.service 2>/dev/null || "
       "(test -x /usr/bin/kiln-agent && . /etc/kiln/agent.env && nohup /usr/bin/kiln-agent run --api \"$KILN_API\" "
       "--phase os --seed-file /etc/kiln/agent.env >/var/log/kiln-agent.log 2>&1 &)']\n";
  return combined_user_data(tenant_user_data, y);
}

std::string nocloud_vendor_data() { return "#cloud-config\n{}\n"; }

}  // namespace kiln
