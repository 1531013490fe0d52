#include "controller/hosts/nocloud.h"

#include <nlohmann/json.hpp>

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

std::string nocloud_meta_data(const Node& node) {
  std::string hostname = node.name.empty() ? "kiln-" + node.id.substr(0, 8) : node.name;
  return "instance-id: " + yaml_quoted(node.id) + "\nlocal-hostname: " + yaml_quoted(hostname) + "\n";
}

std::string nocloud_user_data(const Node& node, const std::vector<std::string>& ssh_keys,
                              const std::string& boot_url) {
  std::string y = "#cloud-config\n";
  y += "ssh_authorized_keys:\n";
  if (ssh_keys.empty()) y.replace(y.size() - 1, 1, " []\n");
  for (const std::string& k : ssh_keys) y += "  - " + yaml_quoted(k) + "\n";
  y += "write_files:\n";
  y += "  - path: /etc/kiln/agent.env\n    permissions: '0644'\n    content: |\n";
  y += "      KILN_API=" + boot_url + "\n      KILN_NODE=" + node.id + "\n      KILN_PHASE=os\n";
  y += "runcmd:\n";
  y += "  - [sh, -c, 'systemctl enable --now kiln-agent.service 2>/dev/null || "
       "(test -x /usr/bin/kiln-agent && . /etc/kiln/agent.env && nohup /usr/bin/kiln-agent run --api \"$KILN_API\" "
       "--phase os >/var/log/kiln-agent.log 2>&1 &)']\n";
  return y;
}

std::string nocloud_vendor_data() { return "#cloud-config\n{}\n"; }

}  // namespace kiln
