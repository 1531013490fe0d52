#include "cli/cluster_files.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kiln::cli {

namespace {

std::string user_of(const ClusterNode& n) {
  const auto at = n.ssh.find('@');
  return at == std::string::npos ? std::string() : n.ssh.substr(0, at);
}

std::string label(const ClusterNode& n) { return n.name.empty() ? n.id : n.name; }

Status write_file(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return Error::invalid(path.string(), "cannot write: " + std::string(std::strerror(errno)));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Error::invalid(path.string(), "cannot write: " + ec.message());
  return ok_status();
}

}  // namespace

nlohmann::json cluster_document(const std::string& cluster, const nlohmann::json& groups,
                                const std::vector<ClusterNode>& nodes) {
  nlohmann::json list = nlohmann::json::array();
  for (const ClusterNode& n : nodes) {
    list.push_back({{"id", n.id},
                    {"name", n.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(n.name)},
                    {"group", n.group},
                    {"profile", n.profile},
                    {"kind", n.kind},
                    {"addresses", n.addresses},
                    {"ssh", n.ssh.empty() ? nlohmann::json(nullptr) : nlohmann::json(n.ssh)},
                    {"gpus", n.gpus}});
  }
  return {{"name", cluster}, {"groups", groups}, {"nodes", std::move(list)}};
}

std::string hostfile_text(const std::vector<ClusterNode>& nodes) {
  std::string s;
  for (const ClusterNode& n : nodes) {
    if (n.addresses.empty()) continue;
    s += n.addresses[0] + " slots=" + std::to_string(n.gpus > 0 ? n.gpus : 1) + "\n";
  }
  return s;
}

std::string ssh_config_text(const std::vector<ClusterNode>& nodes) {
  std::string s;
  for (const ClusterNode& n : nodes) {
    if (n.addresses.empty()) {
      s += "# " + label(n) + ": no address reported yet\n";
      continue;
    }
    s += "Host " + label(n) + "\n  HostName " + n.addresses[0] + "\n";
    if (!user_of(n).empty()) s += "  User " + user_of(n) + "\n";
    s += "\n";
  }
  return s;
}

std::string inventory_text(const std::vector<std::string>& groups, const std::vector<ClusterNode>& nodes) {
  std::string s;
  for (const std::string& g : groups) {
    s += "[" + g + "]\n";
    for (const ClusterNode& n : nodes) {
      if (n.group != g) continue;
      if (n.addresses.empty()) {
        s += "# " + label(n) + ": no address reported yet\n";
        continue;
      }
      s += label(n) + " ansible_host=" + n.addresses[0];
      if (!user_of(n).empty()) s += " ansible_user=" + user_of(n);
      s += "\n";
    }
    s += "\n";
  }
  return s;
}

Status write_cluster_files(const std::string& dir, const std::string& cluster, const nlohmann::json& groups,
                           const std::vector<std::string>& group_names, const std::vector<ClusterNode>& nodes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error::invalid("--output-dir", "cannot create " + dir + ": " + ec.message());
  const std::filesystem::path d(dir);
  if (Status s = write_file(d / "cluster.json", cluster_document(cluster, groups, nodes).dump(2) + "\n"); !s) return s;
  if (Status s = write_file(d / "hostfile", hostfile_text(nodes)); !s) return s;
  if (Status s = write_file(d / "ssh_config", ssh_config_text(nodes)); !s) return s;
  return write_file(d / "inventory.ini", inventory_text(group_names, nodes));
}

}  // namespace kiln::cli
