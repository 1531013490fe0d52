#include "cli/known_hosts_writer.h"

#include "cli/host_fields.h"
#include "common/ssh_host_key.h"

namespace kiln::cli {

namespace {

constexpr std::size_t kMaxNames = 64;

}  // namespace

Result<KnownHostName> KnownHostName::parse(std::string_view text) {
  if (Result<IpLiteral> ip = IpLiteral::parse(text)) return KnownHostName(ip->str());
  if (Result<HostAlias> alias = HostAlias::parse(text)) return KnownHostName(alias->str());
  return Error(Code::kInvalidArgument, describe_value(text) + " is not an IP address or a host name");
}

const std::vector<std::string_view>& HostKey::types() { return ssh_host_key_types(); }

Result<HostKey> HostKey::parse(std::string_view type, std::string_view base64) {
  // The rule lives in common/ssh_host_key.h (kilnd's phone-home route stores
  // keys by it); here its message gains the value, which is the user's own.
  Result<SshHostKey> key = parse_ssh_host_key(type, base64);
  if (!key) {
    const FieldError& f = key.error().fields.at(0);
    return Error::invalid(f.field, describe_value(f.field == "type" ? type : base64) + " " + f.message);
  }
  return HostKey(std::move(key->type), std::move(key->key));
}

std::string known_hosts_text(const std::vector<KnownHostsEntry>& entries) {
  std::string s;
  for (const KnownHostsEntry& e : entries) {
    if (e.names.empty()) continue;
    for (std::size_t i = 0; i < e.names.size(); ++i) s += (i ? "," : "") + e.names[i].str();
    s += " " + e.key.type() + " " + e.key.base64() + "\n";
  }
  return s;
}

Result<std::string> known_hosts_line(const std::vector<std::string>& names, std::string_view type,
                                     std::string_view base64) {
  if (names.empty() || names.size() > kMaxNames) return Error::invalid("names", "must hold 1-64 names");
  std::vector<KnownHostName> parsed;
  for (std::size_t i = 0; i < names.size(); ++i) {
    Result<KnownHostName> n = KnownHostName::parse(names[i]);
    if (!n) return Error::invalid("names/" + std::to_string(i), n.error().message);
    parsed.push_back(std::move(*n));
  }
  Result<HostKey> key = HostKey::parse(type, base64);
  if (!key) return key.take_error();
  return known_hosts_text({KnownHostsEntry{std::move(parsed), std::move(*key)}});
}

}  // namespace kiln::cli
