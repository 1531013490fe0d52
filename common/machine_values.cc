#include "common/machine_values.h"

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <cstring>

namespace kiln {

namespace {

Error refused(std::string message) { return Error(Code::kInvalidArgument, std::move(message)); }

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Four decimal octets, no leading zeros, nothing else. Not inet_pton: its
// acceptance of leading zeros has varied between C libraries, and this
// rule is ours to state.
bool parse_ipv4(std::string_view t, std::array<uint8_t, 4>& out) {
  std::size_t part = 0;
  std::size_t i = 0;
  while (part < 4) {
    std::size_t start = i;
    unsigned value = 0;
    while (i < t.size() && is_digit(t[i]) && i - start < 3) value = value * 10 + static_cast<unsigned>(t[i++] - '0');
    std::size_t len = i - start;
    if (len == 0 || value > 255 || (len > 1 && t[start] == '0')) return false;
    out[part++] = static_cast<uint8_t>(value);
    if (part < 4) {
      if (i >= t.size() || t[i] != '.') return false;
      ++i;
    }
  }
  return i == t.size();
}

// A code point decoded from UTF-8, or invalid (len 1, to skip one byte).
struct Decoded {
  uint32_t cp = 0;
  std::size_t len = 1;
  bool valid = false;
};

Decoded decode_utf8(std::string_view s, std::size_t i) {
  Decoded d;
  const auto b0 = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  uint32_t cp = 0;
  uint32_t min = 0;
  if (b0 < 0x80) {
    d.cp = b0;
    d.valid = true;
    return d;
  }
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 1;
    cp = b0 & 0x1f;
    min = 0x80;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 2;
    cp = b0 & 0x0f;
    min = 0x800;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 3;
    cp = b0 & 0x07;
    min = 0x10000;
  } else {
    return d;  // a continuation byte, 0xc0/0xc1 (overlong) or 0xf5+
  }
  if (i + n >= s.size()) return d;  // truncated sequence
  for (std::size_t k = 1; k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xc0) != 0x80) return d;
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return d;
  d.cp = cp;
  d.len = n + 1;
  d.valid = true;
  return d;
}

bool is_control(uint32_t cp) { return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f); }
// Text that reads differently on screen from what it is: line and
// paragraph separators, bidirectional embeddings, overrides and isolates.
bool is_deceptive(uint32_t cp) {
  return cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}
bool is_line_break_like(uint32_t cp) { return cp == '\t' || cp == '\n' || cp == '\r' || cp == '\v' || cp == '\f'; }

}  // namespace

Result<std::string> parse_ip_address(std::string_view t) {
  if (t.empty()) return refused("is empty");
  if (t.size() > kMaxIpAddressText) return refused("is too long for an IP address");
  if (t.find('%') != std::string_view::npos) return refused("has a scope id (%...); report the address alone");
  if (t.find('/') != std::string_view::npos) return refused("has a prefix length; report the address alone");
  bool v6 = false;
  for (char c : t) {
    if (c == ':') v6 = true;
    else if (!is_hex(c) && c != '.') return refused("is not an IP address (only hex digits, ':' and '.')");
  }
  if (!v6) {
    std::array<uint8_t, 4> a{};
    if (!parse_ipv4(t, a)) return refused("is not an IPv4 address (a.b.c.d, decimal octets without leading zeros)");
    if (a[0] == 0) return refused("is in 0.0.0.0/8 (this network): not an address a host is reached at");
    if (a[0] >= 224 && a[0] <= 239) return refused("is a multicast address");
    if (a == std::array<uint8_t, 4>{255, 255, 255, 255}) return refused("is the broadcast address");
    return std::to_string(a[0]) + "." + std::to_string(a[1]) + "." + std::to_string(a[2]) + "." +
           std::to_string(a[3]);
  }
  // An embedded IPv4 part (RFC 4291 §2.2 form 3) must be a strict dotted
  // quad too; inet_pton checks the rest of the grammar.
  if (std::size_t dot = t.find('.'); dot != std::string_view::npos) {
    std::size_t colon = t.rfind(':');
    std::array<uint8_t, 4> a{};
    if (colon > dot || !parse_ipv4(t.substr(colon + 1), a))
      return refused("is not an IPv6 address (its IPv4 part is not a.b.c.d)");
  }
  std::string z(t);
  in6_addr a6{};
  if (inet_pton(AF_INET6, z.c_str(), &a6) != 1) return refused("is not an IPv6 address");
  static constexpr uint8_t kZero[16] = {};
  static constexpr uint8_t kMappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(a6.s6_addr, kZero, 16) == 0) return refused("is the unspecified address (::)");
  if (a6.s6_addr[0] == 0xff) return refused("is a multicast address");
  if (std::memcmp(a6.s6_addr, kMappedPrefix, 12) == 0)
    return refused("is an IPv4-mapped IPv6 address; report the IPv4 address");
  char text[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(AF_INET6, &a6, text, sizeof(text)) == nullptr) return refused("is not an IPv6 address");
  return std::string(text);
}

bool is_loopback_or_link_local(std::string_view address) {
  Result<std::string> a = parse_ip_address(address);
  if (!a) return false;
  const std::string& c = *a;
  if (c.find(':') == std::string::npos) return c.starts_with("127.") || c.starts_with("169.254.");
  if (c == "::1") return true;
  // fe80::/10: the first 16-bit group is fe80 through febf (canonical text
  // is lower case and has no leading zeros, so a 4-digit group starts it).
  std::size_t colon = c.find(':');
  if (colon != 4) return false;
  std::string_view head(c.data(), 4);
  return head >= "fe80" && head <= "febf";
}

Result<std::string> parse_hostname(std::string_view t) {
  if (!t.empty() && t.back() == '.') t.remove_suffix(1);
  if (t.empty()) return refused("is empty");
  if (t.size() > 253) return refused("is longer than 253 characters");
  std::string out;
  out.reserve(t.size());
  std::size_t label = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (c == '.') {
      if (label == 0) return refused("has an empty label");
      if (t[i - 1] == '-') return refused("has a label ending with '-'");
      label = 0;
    } else if (is_alpha(c) || is_digit(c) || c == '-') {
      if (c == '-' && label == 0) return refused("has a label starting with '-'");
      if (++label > 63) return refused("has a label longer than 63 characters");
    } else {
      return refused("is not a host name (letters, digits, '-' and '.' only)");
    }
    out.push_back(lower(c));
  }
  if (label == 0) return refused("has an empty label");
  if (t.back() == '-') return refused("has a label ending with '-'");
  return out;
}

Result<std::string> parse_interface_name(std::string_view t) {
  if (t.empty()) return refused("is empty");
  if (t.size() > kMaxInterfaceName) return refused("is longer than 15 characters (IFNAMSIZ)");
  if (t == "." || t == "..") return refused("is not an interface name");
  for (char c : t)
    if (!is_alpha(c) && !is_digit(c) && c != '_' && c != '.' && c != '-')
      return refused("is not an interface name (letters, digits, '_', '.' and '-' only)");
  return std::string(t);
}

Status check_printable(std::string_view t, std::size_t max_len) {
  if (t.size() > max_len) return refused("is longer than " + std::to_string(max_len) + " bytes");
  for (std::size_t i = 0; i < t.size();) {
    Decoded d = decode_utf8(t, i);
    if (!d.valid) return refused("is not valid UTF-8");
    if (is_control(d.cp)) return refused("holds a control character");
    if (is_deceptive(d.cp)) return refused("holds a line separator or a bidirectional override");
    i += d.len;
  }
  return ok_status();
}

std::string printable_field(std::string_view t, std::size_t max_len) {
  std::string out;
  out.reserve(t.size() < max_len ? t.size() : max_len);
  bool pending_space = false;  // a run of blanks seen since the last character
  for (std::size_t i = 0; i < t.size();) {
    Decoded d = decode_utf8(t, i);
    if (d.valid && (d.cp == ' ' || is_line_break_like(d.cp))) {
      pending_space = true;
      i += d.len;
      continue;
    }
    if (!d.valid || is_control(d.cp) || is_deceptive(d.cp)) {
      i += d.len;  // dropped; does not end a blank run
      continue;
    }
    // Cut at a character boundary, and never after a space: the space and
    // the character after it fit together or neither goes in.
    const bool space = pending_space && !out.empty();
    if (out.size() + (space ? 1 : 0) + d.len > max_len) break;
    if (space) out.push_back(' ');
    pending_space = false;
    out.append(t.substr(i, d.len));
    i += d.len;
  }
  return out;
}

}  // namespace kiln
