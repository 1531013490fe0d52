#include "controller/boot/dhcp_leases.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln::boot {
namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// "aa:bb:cc:dd:ee:ff" (either case) -> lowercase; nullopt for anything else.
std::optional<std::string> ethernet_mac(std::string_view s) {
  if (s.size() != 17) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i % 3 == 2) {
      if (c != ':') return std::nullopt;
      out.push_back(':');
    } else {
      if (!is_hex(c)) return std::nullopt;
      out.push_back(static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c));
    }
  }
  return out;
}

// Colon hex of some other hardware type ("01:02", a 20-octet InfiniBand
// address, "6-aa:bb..." with a type prefix): a legal line we skip.
bool other_hardware(std::string_view s) {
  if (s.empty() || s.size() > 200) return false;
  std::size_t start = 0;
  const std::size_t dash = s.find('-');
  if (dash != std::string_view::npos) {
    if (dash == 0 || dash > 3) return false;
    for (std::size_t i = 0; i < dash; ++i)
      if (s[i] < '0' || s[i] > '9') return false;
    start = dash + 1;
  }
  if (start >= s.size()) return false;
  for (std::size_t i = start; i < s.size(); ++i)
    if (!is_hex(s[i]) && s[i] != ':') return false;
  return true;
}

std::optional<int64_t> expiry_of(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;  // fits int64 without overflow
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

bool ipv4(std::string_view s) {
  int parts = 0;
  std::size_t i = 0;
  while (i <= s.size()) {
    std::size_t j = i;
    int v = 0;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9' && j - i < 3) v = v * 10 + (s[j++] - '0');
    if (j == i || v > 255 || (j - i > 1 && s[i] == '0')) return false;
    ++parts;
    if (j == s.size()) break;
    if (s[j] != '.' || parts == 4) return false;
    i = j + 1;
  }
  return parts == 4;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size() && out.size() < 8) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == line.size()) break;
    std::size_t j = line.find(' ', i);
    if (j == std::string_view::npos) j = line.size();
    out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

Error bad_line(std::size_t n, const std::string& why) {
  return Error::invalid("leases", "line " + std::to_string(n) + ": " + why);
}

}  // namespace

Result<std::vector<DhcpLease>> parse_dnsmasq_leases(std::string_view text) {
  if (text.size() > kMaxLeaseFileBytes)
    return Error::invalid("leases", "lease file over " + std::to_string(kMaxLeaseFileBytes) + " bytes");
  std::vector<DhcpLease> out;
  bool ipv6_part = false;
  std::size_t pos = 0, n = 0;
  while (pos < text.size()) {
    ++n;
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() > kMaxLeaseLineBytes) return bad_line(n, "longer than " + std::to_string(kMaxLeaseLineBytes) + " bytes");
    if (line.find('\0') != std::string_view::npos || line.find('\r') != std::string_view::npos ||
        line.find('\t') != std::string_view::npos)
      return bad_line(n, "control character");
    if (line.empty()) continue;
    std::vector<std::string_view> f = fields(line);
    if (f.size() == 2 && f[0] == "duid") {
      ipv6_part = true;  // everything after it is a DHCPv6 lease
      continue;
    }
    if (ipv6_part) continue;
    if (f.size() != 5) return bad_line(n, "expected 5 fields");
    std::optional<int64_t> expiry = expiry_of(f[0]);
    if (!expiry) return bad_line(n, "bad expiry");
    if (!ipv4(f[2])) return bad_line(n, "bad IPv4 address");
    std::optional<std::string> mac = ethernet_mac(f[1]);
    if (!mac) {
      if (other_hardware(f[1])) continue;
      return bad_line(n, "bad hardware address");
    }
    DhcpLease l;
    l.expiry = *expiry;
    l.mac = std::move(*mac);
    l.ip = std::string(f[2]);
    out.push_back(std::move(l));
  }
  return out;
}

std::optional<std::string> leased_address(const std::vector<DhcpLease>& leases, std::string_view mac, int64_t now_s) {
  const DhcpLease* best = nullptr;
  for (const DhcpLease& l : leases) {
    if (l.mac != mac) continue;
    if (l.expiry != 0 && l.expiry <= now_s) continue;
    if (best == nullptr || l.expiry == 0 || (best->expiry != 0 && l.expiry > best->expiry)) best = &l;
  }
  if (best == nullptr) return std::nullopt;
  return best->ip;
}

Result<std::vector<DhcpLease>> LeaseFile::read() const {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::vector<DhcpLease>();
    return Error(Code::kInternal, "cannot open the DHCP lease file " + path_ + ": " + std::strerror(errno));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const int e = errno;
      ::close(fd);
      return Error(Code::kInternal, "cannot read the DHCP lease file " + path_ + ": " + std::strerror(e));
    }
    if (r == 0) break;
    text.append(buf, static_cast<std::size_t>(r));
    if (text.size() > kMaxLeaseFileBytes) break;  // the parser refuses it
  }
  ::close(fd);
  return parse_dnsmasq_leases(text);
}

Result<std::optional<std::string>> LeaseFile::address_of(std::string_view mac, int64_t now_s) const {
  Result<std::vector<DhcpLease>> leases = read();
  if (!leases) return leases.take_error();
  return leased_address(*leases, mac, now_s);
}

}  // namespace kiln::boot
