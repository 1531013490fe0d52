#pragma once
// known_hosts text: "<name>,<name>... <key type> <base64 key>" per host, the
// format ssh's UserKnownHostsFile and `ssh-keygen -F` read (sshd(8),
// "SSH_KNOWN_HOSTS FILE FORMAT").
//
// A host key comes from the machine (the real OS reports it), so every part
// is parsed before it is written: names are host aliases or canonical IP
// literals (cli/host_fields.h), which can hold no `,` (a second name), `*`,
// `?` or `!` (patterns), `@` (a @cert-authority / @revoked marker), `|`
// (a hashed entry), `[` (a port) or blank; type and key by the one rule of
// common/ssh_host_key.h (an OpenSSH host key type; strict, canonical,
// bounded base64 of a complete key blob of that type).
// A line whose key ssh would read as another type, or as a second field, is
// thereby impossible. Pure and thread-compatible.

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace kiln::cli {

// One name in the first field: an IP address (written canonical) or a host
// alias. kInvalidArgument when it is neither.
class KnownHostName {
 public:
  static Result<KnownHostName> parse(std::string_view text);
  const std::string& str() const { return v_; }

 private:
  explicit KnownHostName(std::string v) : v_(std::move(v)) {}
  std::string v_;
};

// A public host key: its type and its base64 blob.
class HostKey {
 public:
  // ssh_host_key_types() (common/ssh_host_key.h).
  static const std::vector<std::string_view>& types();
  // Errors (kInvalidArgument, naming "type" or "key" in `fields`): an unknown
  // type; a key that is not canonical base64 of at most 16384 characters;
  // a blob that is not a complete key of `type` (parse_ssh_host_key).
  static Result<HostKey> parse(std::string_view type, std::string_view base64);
  const std::string& type() const { return type_; }
  const std::string& base64() const { return base64_; }

 private:
  HostKey(std::string type, std::string base64) : type_(std::move(type)), base64_(std::move(base64)) {}
  std::string type_, base64_;
};

struct KnownHostsEntry {
  std::vector<KnownHostName> names;  // at least one
  HostKey key;
};

// The whole file, one line per entry (an entry without names is skipped:
// a line with an empty first field would be a parse error to ssh).
std::string known_hosts_text(const std::vector<KnownHostsEntry>& entries);

// One line from raw values, parsing each: `names` (1-64 of them, each an IP
// address or host alias), the key type and the base64 key. Errors are
// kInvalidArgument with one field: "names/<i>", "names", "type" or "key".
Result<std::string> known_hosts_line(const std::vector<std::string>& names, std::string_view type,
                                     std::string_view base64);

}  // namespace kiln::cli
