#include "cli/ssh_config_writer.h"

namespace kiln::cli {

Result<SshConfigPath> SshConfigPath::parse(std::string_view path) {
  constexpr std::size_t kMaxPath = 4096;
  auto refuse = [&](const char* why) {
    return Error(Code::kInvalidArgument, describe_value(path) + " cannot be written into ssh_config: " + why);
  };
  if (path.empty() || path.size() > kMaxPath) return refuse("it must be 1-4096 bytes");
  if (path.front() != '/') return refuse("it must be an absolute path");
  std::string quoted = "\"";
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) return refuse("only printable ASCII can be quoted");
    if (c == '"' || c == '\\') return refuse("ssh gives '\"' and '\\' a meaning inside quotes");
    if (c == '$') return refuse("ssh expands ${...} in this option");
    if (c == '%') quoted += '%';  // ssh expands %-tokens here; %% is a literal %
    quoted += c;
  }
  quoted += '"';
  return SshConfigPath(std::string(path), std::move(quoted));
}

std::string ssh_config_text(const std::vector<SshConfigHost>& hosts, const SshConfigOptions& options) {
  std::string s;
  for (const SshConfigHost& h : hosts) {
    if (!h.address) {
      s += "# " + h.alias.str() + ": no address reported yet\n";
      continue;
    }
    s += "Host " + h.alias.str() + "\n  HostName " + h.address->str() + "\n";
    if (h.user) s += "  User " + h.user->str() + "\n";
    if (options.known_hosts)
      s += "  StrictHostKeyChecking yes\n  UserKnownHostsFile " + options.known_hosts->quoted() + "\n";
    s += "\n";
  }
  return s;
}

}  // namespace kiln::cli
