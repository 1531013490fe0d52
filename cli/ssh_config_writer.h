#pragma once
// ssh_config text for a cluster's nodes: one block per reachable node
//
//   Host <alias>
//     HostName <address>
//     User <login>                       (when the image names one)
//     StrictHostKeyChecking yes          (when a known_hosts file is written)
//     UserKnownHostsFile "<path>"
//
// and "# <alias>: no address reported yet" for a node that has none. Every
// value is a parsed type (cli/host_fields.h), so no value can end a line,
// start a comment, add an argument or hold an ssh `%` token; the only free
// text, the known_hosts path, is checked and quoted by SshConfigPath. The
// functions are pure and thread-compatible.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/host_fields.h"
#include "common/result.h"

namespace kiln::cli {

// A file path as an ssh_config argument, double-quoted. ssh splits arguments
// on blanks outside quotes, expands `~` at the start, `%` tokens and `${VAR}`
// in UserKnownHostsFile, and gives `\` and `"` meaning inside quotes. So the
// path must be absolute (no `~`), printable ASCII without `"`, `\` or `$`,
// at most 4096 bytes; `%` is written `%%`. Anything else is refused
// (kInvalidArgument quoting the path): it cannot be expressed safely.
class SshConfigPath {
 public:
  static Result<SshConfigPath> parse(std::string_view path);
  const std::string& path() const { return path_; }
  // `"<path with % doubled>"`, ready to follow a keyword.
  const std::string& quoted() const { return quoted_; }

 private:
  SshConfigPath(std::string path, std::string quoted) : path_(std::move(path)), quoted_(std::move(quoted)) {}
  std::string path_, quoted_;
};

// One node: `address` empty means "no address reported yet" (a comment, no
// Host block: the file never invents an address).
struct SshConfigHost {
  HostAlias alias;
  std::optional<IpLiteral> address;
  std::optional<LoginName> user;
};

struct SshConfigOptions {
  // When set, each Host block pins host keys to this file: ssh then refuses
  // a host whose key is not in it instead of asking (or trusting on first use).
  std::optional<SshConfigPath> known_hosts;
};

// The whole file, in `hosts` order. Aliases are not checked for uniqueness
// here (the caller knows which node each came from and names it).
std::string ssh_config_text(const std::vector<SshConfigHost>& hosts, const SshConfigOptions& options = {});

}  // namespace kiln::cli
