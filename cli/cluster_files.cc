#include "cli/cluster_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "cli/host_fields.h"
#include "cli/hostfile_writer.h"
#include "cli/inventory_writer.h"
#include "cli/known_hosts_writer.h"
#include "cli/ssh_config_writer.h"

namespace kiln::cli {

namespace {

// One node's values after parsing: what every writer takes.
struct CheckedNode {
  const ClusterNode* raw = nullptr;
  HostAlias alias;
  std::vector<IpLiteral> addresses;
  std::optional<LoginName> user;
  std::optional<IpLiteral> ssh_address;
  SlotCount slots;
  std::vector<HostKey> host_keys;
};

// How an error names a node: by a name or id that is safe to print as is,
// else by the quoted value (which cannot hold a newline).
std::string node_label(const ClusterNode& n) {
  const std::string& preferred = n.name.empty() ? n.id : n.name;
  if (HostAlias::parse(preferred)) return preferred;
  if (HostAlias::parse(n.id)) return n.id;
  return describe_value(preferred);
}

// kilnd's data, not the user's flags: a refusal is "unprocessable" (exit 2)
// and names the node and the field.
Error refuse(const ClusterNode& n, const std::string& field, const std::string& message) {
  const std::string where = "node " + node_label(n) + ": " + field;
  return Error(Code::kUnprocessable, where + ": " + message, {FieldError{where, message}});
}

Result<CheckedNode> check_node(const ClusterNode& n) {
  // The id names the node in cluster.json and in errors: kilnd makes it, so
  // anything but a token means the reply is not kilnd's.
  if (Result<HostAlias> id = HostAlias::parse(n.id); !id) return refuse(n, "id", id.error().message);
  // The alias is the name, or the id for a node without one (as before).
  Result<HostAlias> alias = HostAlias::parse(n.name.empty() ? n.id : n.name);
  if (!alias) return refuse(n, "name", alias.error().message);
  Result<SlotCount> slots = SlotCount::from_gpus(n.gpus);
  if (!slots) return refuse(n, "gpus", slots.error().message);
  CheckedNode c{&n, std::move(*alias), {}, std::nullopt, std::nullopt, *slots, {}};
  for (std::size_t i = 0; i < n.addresses.size(); ++i) {
    Result<IpLiteral> a = IpLiteral::parse(n.addresses[i]);
    if (!a) return refuse(n, "addresses/" + std::to_string(i), a.error().message);
    c.addresses.push_back(std::move(*a));
  }
  if (!n.ssh.empty()) {
    const auto at = n.ssh.find('@');
    if (at == std::string::npos) return refuse(n, "ssh", describe_value(n.ssh) + " is not user@address");
    Result<LoginName> user = LoginName::parse(std::string_view(n.ssh).substr(0, at));
    if (!user) return refuse(n, "ssh", user.error().message);
    Result<IpLiteral> addr = IpLiteral::parse(std::string_view(n.ssh).substr(at + 1));
    if (!addr) return refuse(n, "ssh", addr.error().message);
    c.user = std::move(*user);
    c.ssh_address = std::move(*addr);
  }
  for (std::size_t i = 0; i < n.ssh_host_keys.size(); ++i) {
    Result<HostKey> k = HostKey::parse(n.ssh_host_keys[i].first, n.ssh_host_keys[i].second);
    if (!k) return refuse(n, "ssh_host_keys/" + std::to_string(i), k.error().message);
    c.host_keys.push_back(std::move(*k));
  }
  return c;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

nlohmann::json cluster_document(const std::string& cluster, const nlohmann::json& groups,
                                const std::vector<CheckedNode>& nodes) {
  nlohmann::json list = nlohmann::json::array();
  for (const CheckedNode& c : nodes) {
    const ClusterNode& n = *c.raw;
    nlohmann::json addresses = nlohmann::json::array();
    for (const IpLiteral& a : c.addresses) addresses.push_back(a.str());
    list.push_back({{"id", n.id},
                    {"name", n.name.empty() ? nlohmann::json(nullptr) : nlohmann::json(n.name)},
                    {"group", n.group},
                    {"profile", n.profile},
                    {"kind", n.kind},
                    {"addresses", std::move(addresses)},
                    {"ssh", c.user ? nlohmann::json(c.user->str() + "@" + c.ssh_address->str()) : nlohmann::json(nullptr)},
                    {"gpus", n.gpus}});
  }
  return {{"name", cluster}, {"groups", groups}, {"nodes", std::move(list)}};
}

std::optional<IpLiteral> first_address(const CheckedNode& c) {
  if (c.addresses.empty()) return std::nullopt;
  return c.addresses.front();
}

// Writes `text` to a fresh temporary file beside `path` (an old one of that
// name is replaced; a symlink there is not followed).
Status write_temp(const std::filesystem::path& tmp, const std::filesystem::path& path, const std::string& text) {
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Error::invalid(path.string(), "cannot write: " + std::string(std::strerror(errno)));
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return Error::invalid(path.string(), "cannot write: " + std::string(std::strerror(err)));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) return Error::invalid(path.string(), "cannot write: " + std::string(std::strerror(errno)));
  return ok_status();
}

}  // namespace

Result<ClusterFiles> render_cluster_files(const std::string& cluster, const nlohmann::json& groups,
                                          const std::vector<std::string>& group_names,
                                          const std::vector<ClusterNode>& nodes,
                                          const std::string& known_hosts_path) {
  std::vector<CheckedNode> checked;
  std::map<std::string, const ClusterNode*> by_alias;  // lower-cased alias -> node
  for (const ClusterNode& n : nodes) {
    Result<CheckedNode> c = check_node(n);
    if (!c) return c.take_error();
    auto [it, fresh] = by_alias.emplace(lower(c->alias.str()), &n);
    if (!fresh)
      return refuse(n, n.name.empty() ? "id" : "name",
                    describe_value(c->alias.str()) + " is also the name of node " + node_label(*it->second));
    checked.push_back(std::move(*c));
  }

  // A name that is another node's address: `ssh <that address>` would match
  // this node's Host block, and known_hosts would list this node's key under
  // the other's address, so ssh would accept this node's key for the other.
  std::map<std::string, const CheckedNode*> by_address;
  for (const CheckedNode& c : checked)
    for (const IpLiteral& a : c.addresses) by_address.emplace(a.str(), &c);
  for (const CheckedNode& c : checked) {
    Result<IpLiteral> as_ip = IpLiteral::parse(c.alias.str());
    if (!as_ip) continue;
    auto it = by_address.find(as_ip->str());
    if (it != by_address.end() && it->second != &c)
      return refuse(*c.raw, c.raw->name.empty() ? "id" : "name",
                    describe_value(c.alias.str()) + " is the address of node " + node_label(*it->second->raw));
  }

  std::vector<HostfileEntry> hostfile;
  std::vector<SshConfigHost> ssh;
  for (const CheckedNode& c : checked) {
    if (std::optional<IpLiteral> a = first_address(c)) hostfile.push_back({*a, c.slots});
    ssh.push_back({c.alias, first_address(c), c.user});
  }
  std::vector<InventoryGroup> inventory;
  for (std::size_t i = 0; i < group_names.size(); ++i) {
    Result<GroupName> g = GroupName::parse(group_names[i]);
    if (!g) return Error(Code::kUnprocessable, "group " + std::to_string(i) + ": " + g.error().message,
                         {FieldError{"group " + std::to_string(i), g.error().message}});
    InventoryGroup group{std::move(*g), {}};
    for (const CheckedNode& c : checked)
      if (c.raw->group == group_names[i]) group.hosts.push_back({c.alias, first_address(c), c.user});
    inventory.push_back(std::move(group));
  }
  // The spec's strings (group, profile, kind) were checked by the spec
  // parser; `replace` keeps dump() from throwing should one not be UTF-8.
  const std::string json =
      cluster_document(cluster, groups, checked).dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  // known_hosts: each key under the node's name and every address (ssh
  // looks a Host block's key up by its HostName, the first address).
  std::vector<KnownHostsEntry> known;
  bool every_reachable_has_keys = false;
  for (const CheckedNode& c : checked) {
    if (c.addresses.empty()) continue;
    if (c.host_keys.empty()) {
      every_reachable_has_keys = false;
      break;
    }
    every_reachable_has_keys = true;
  }
  for (const CheckedNode& c : checked) {
    std::vector<KnownHostName> names;
    if (Result<KnownHostName> a = KnownHostName::parse(c.alias.str())) names.push_back(std::move(*a));
    for (const IpLiteral& ip : c.addresses)
      if (Result<KnownHostName> a = KnownHostName::parse(ip.str())) names.push_back(std::move(*a));
    for (const HostKey& k : c.host_keys) known.push_back({names, k});
  }
  SshConfigOptions options;
  if (every_reachable_has_keys && !known_hosts_path.empty()) {
    Result<SshConfigPath> path = SshConfigPath::parse(known_hosts_path);
    if (!path) return Error::invalid("--output-dir", path.error().message);
    options.known_hosts = std::move(*path);
  }
  const bool pinned = options.known_hosts.has_value();
  return ClusterFiles{json + "\n", hostfile_text(hostfile), ssh_config_text(ssh, options),
                      inventory_text(inventory), known_hosts_text(known), pinned};
}

Status write_cluster_files(const std::string& dir, const std::string& cluster, const nlohmann::json& groups,
                           const std::vector<std::string>& group_names, const std::vector<ClusterNode>& nodes) {
  std::error_code ec;
  const std::filesystem::path known_hosts = std::filesystem::absolute(std::filesystem::path(dir) / "known_hosts", ec);
  if (ec) return Error::invalid("--output-dir", "cannot resolve " + dir + ": " + ec.message());
  Result<ClusterFiles> files = render_cluster_files(cluster, groups, group_names, nodes, known_hosts.lexically_normal().string());
  if (!files) return files.take_error();
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error::invalid("--output-dir", "cannot create " + dir + ": " + ec.message());
  const std::filesystem::path d(dir);
  const std::pair<const char*, const std::string*> all[] = {{"cluster.json", &files->cluster_json},
                                                            {"hostfile", &files->hostfile},
                                                            {"ssh_config", &files->ssh_config},
                                                            {"inventory.ini", &files->inventory},
                                                            {"known_hosts", &files->known_hosts}};
  auto tmp_of = [&](const char* name) { return d / ("." + std::string(name) + ".tmp"); };
  auto drop_temps = [&] {
    for (const auto& [name, text] : all) ::unlink(tmp_of(name).c_str());
  };
  for (const auto& [name, text] : all) {
    if (Status s = write_temp(tmp_of(name), d / name, *text); !s) {
      drop_temps();
      return s;
    }
  }
  for (const auto& [name, text] : all) {
    std::filesystem::rename(tmp_of(name), d / name, ec);
    if (ec) {
      drop_temps();
      return Error::invalid((d / name).string(), "cannot write: " + ec.message());
    }
  }
  return ok_status();
}

}  // namespace kiln::cli
