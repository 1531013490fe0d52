#include "common/ssh_host_key.h"

#include <cstdint>

#include "common/crypto.h"

namespace kiln {
namespace {

bool base64_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Error bad_key(const std::string& why) { return Error::invalid("key", why); }

}  // namespace

const std::vector<std::string_view>& ssh_host_key_types() {
  static const std::vector<std::string_view> kTypes = {
      "ssh-ed25519",         "ecdsa-sha2-nistp256",        "ecdsa-sha2-nistp384",
      "ecdsa-sha2-nistp521", "ssh-rsa",                    "sk-ssh-ed25519@openssh.com",
      "sk-ecdsa-sha2-nistp256@openssh.com",
  };
  return kTypes;
}

std::string ssh_key_sha256_fingerprint(std::string_view blob) {
  const std::string hex = sha256_hex(blob);
  std::string digest;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    digest.push_back(static_cast<char>(hex_value(hex[i]) * 16 + hex_value(hex[i + 1])));
  std::string b64 = base64_encode(digest);
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return "SHA256:" + b64;
}

Result<SshHostKey> parse_ssh_host_key(std::string_view type, std::string_view base64) {
  bool known = false;
  for (std::string_view t : ssh_host_key_types()) known = known || t == type;
  if (!known) return Error::invalid("type", "is not an OpenSSH host key type");
  if (base64.empty() || base64.size() > kMaxSshHostKeyBase64 || base64.size() % 4 != 0)
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
  // one naming another type, is refused.
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
  return SshHostKey{std::string(type), std::string(base64), ssh_key_sha256_fingerprint(*blob)};
}

Result<SshHostKey> parse_ssh_host_key_line(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // Bounded before anything is split: type, one blank, the key, a comment.
  if (line.size() > kMaxSshHostKeyBase64 + 1024) return bad_key("is longer than an OpenSSH public key line");
  for (char c : line)
    if (static_cast<unsigned char>(c) < 0x20 && c != '\t') return bad_key("holds a control character");
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  std::size_t i = 0;
  auto field = [&]() {
    while (i < line.size() && blank(line[i])) ++i;
    std::size_t start = i;
    while (i < line.size() && !blank(line[i])) ++i;
    return line.substr(start, i - start);
  };
  std::string_view type = field();
  std::string_view key = field();
  if (type.empty() || key.empty()) return bad_key("is not an OpenSSH public key line (<type> <base64> [comment])");
  Result<SshHostKey> parsed = parse_ssh_host_key(type, key);
  // A bad type in a line is a bad key line: the caller names the line's field.
  if (!parsed) return bad_key(parsed.error().fields.empty() ? parsed.error().message
                                                           : parsed.error().fields[0].field + " " +
                                                                 parsed.error().fields[0].message);
  return parsed;
}

}  // namespace kiln
