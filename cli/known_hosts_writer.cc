#include "cli/known_hosts_writer.h"

#include <cstdint>

#include "cli/host_fields.h"
#include "common/crypto.h"

namespace kiln::cli {

namespace {

constexpr std::size_t kMaxKeyBase64 = 16384;  // a 16384-bit RSA key is ~2.8k
constexpr std::size_t kMaxNames = 64;

bool base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

Result<KnownHostName> KnownHostName::parse(std::string_view text) {
  if (Result<IpLiteral> ip = IpLiteral::parse(text)) return KnownHostName(ip->str());
  if (Result<HostAlias> alias = HostAlias::parse(text)) return KnownHostName(alias->str());
  return Error(Code::kInvalidArgument, describe_value(text) + " is not an IP address or a host name");
}

const std::vector<std::string_view>& HostKey::types() {
  static const std::vector<std::string_view> kTypes = {
      "ssh-ed25519",         "ecdsa-sha2-nistp256",        "ecdsa-sha2-nistp384",
      "ecdsa-sha2-nistp521", "ssh-rsa",                    "sk-ssh-ed25519@openssh.com",
      "sk-ecdsa-sha2-nistp256@openssh.com",
  };
  return kTypes;
}

Result<HostKey> HostKey::parse(std::string_view type, std::string_view base64) {
  bool known = false;
  for (std::string_view t : types()) known = known || t == type;
  if (!known) return Error::invalid("type", describe_value(type) + " is not an OpenSSH host key type");
  auto bad_key = [&](const std::string& why) { return Error::invalid("key", describe_value(base64) + " " + why); };
  if (base64.empty() || base64.size() > kMaxKeyBase64 || base64.size() % 4 != 0)
    return bad_key("is not base64 of 4-16384 characters");
  // Padding only at the end; everything before it from the alphabet.
  std::size_t end = base64.size();
  while (end > 0 && base64.size() - end < 2 && base64[end - 1] == '=') --end;
  for (std::size_t i = 0; i < end; ++i)
    if (!base64_char(base64[i])) return bad_key("is not base64");
  Result<std::string> blob = base64_decode(base64);
  // Canonical: re-encoding gives the same text, so no stray bits in the
  // last character and no lenient-decoder surprises.
  if (!blob || base64_encode(*blob) != base64) return bad_key("is not canonical base64");
  // The wire format (RFC 4253 §6.6, RFC 5656 §3.1, PROTOCOL.u2f): a run of
  // strings (uint32 length, bytes) that fills the blob exactly, the first the
  // type name; their count is fixed per type. A truncated or padded blob, or
  // one naming another type, is not written.
  std::vector<std::string_view> parts;
  std::string_view rest(*blob);
  while (!rest.empty()) {
    if (rest.size() < 4) return bad_key("is not an SSH public key blob");
    const auto* b = reinterpret_cast<const unsigned char*>(rest.data());
    const uint32_t n = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
    if (n > rest.size() - 4) return bad_key("is not an SSH public key blob");
    parts.push_back(rest.substr(4, n));
    rest.remove_prefix(4 + std::size_t{n});
  }
  if (parts.empty() || parts[0] != type) return bad_key("does not hold a " + std::string(type) + " key");
  std::size_t want = 3;  // type, then (e, n) or (curve, point) or (key, application)
  if (type == "ssh-ed25519") want = 2;
  if (type == "sk-ecdsa-sha2-nistp256@openssh.com") want = 4;
  const bool ed25519 = type == "ssh-ed25519" || type == "sk-ssh-ed25519@openssh.com";
  if (parts.size() != want || (ed25519 && parts[1].size() != 32))
    return bad_key("is not a complete " + std::string(type) + " key");
  return HostKey(std::string(type), std::string(base64));
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
