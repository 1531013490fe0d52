#include "controller/boot/url_guard.h"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <array>
#include <charconv>
#include <cstring>

namespace kiln::boot {
namespace {

namespace ip = boost::asio::ip;

// Address bytes in network order (v4-mapped v6 addresses are compared as v4).
ip::address unmapped(const ip::address& a) {
  if (a.is_v6() && a.to_v6().is_v4_mapped()) return ip::make_address_v4(ip::v4_mapped, a.to_v6());
  return a;
}

template <std::size_t N>
bool prefix_equal(const std::array<unsigned char, N>& a, const std::array<unsigned char, N>& b, unsigned prefix) {
  for (unsigned bit = 0; bit < prefix && bit < N * 8; ++bit) {
    const unsigned byte = bit / 8, mask = 0x80u >> (bit % 8);
    if ((a[byte] & mask) != (b[byte] & mask)) return false;
  }
  return true;
}

// Metadata services that do not live in link-local space.
bool is_metadata(const ip::address& a) {
  if (a.is_v4()) return a.to_v4() == ip::make_address_v4("100.100.100.200");  // Alibaba Cloud
  return a.to_v6() == ip::make_address_v6("fd00:ec2::254");                   // AWS over IPv6
}

// This host's addresses (for a listener on 0.0.0.0 or ::).
bool is_local_address(const ip::address& a) {
  if (a.is_loopback()) return true;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET && a.is_v4()) {
      auto* sin = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
      ip::address_v4::bytes_type b;
      std::memcpy(b.data(), &sin->sin_addr, 4);
      found = ip::address_v4(b) == a.to_v4();
    } else if (i->ifa_addr->sa_family == AF_INET6 && a.is_v6()) {
      auto* sin6 = reinterpret_cast<sockaddr_in6*>(i->ifa_addr);
      ip::address_v6::bytes_type b;
      std::memcpy(b.data(), &sin6->sin6_addr, 16);
      found = ip::address_v6(b) == a.to_v6();
    }
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace

bool Cidr::contains(const ip::address& raw) const {
  const ip::address a = unmapped(raw);
  if (a.is_v4() != network.is_v4()) return false;
  if (a.is_v4()) return prefix_equal(a.to_v4().to_bytes(), network.to_v4().to_bytes(), prefix);
  return prefix_equal(a.to_v6().to_bytes(), network.to_v6().to_bytes(), prefix);
}

Result<Cidr> parse_cidr(std::string_view text) {
  const auto bad = [&] {
    return Error::invalid("--image-url-allow", "must be an address or CIDR (e.g. 10.20.0.0/16 or 2001:db8::/32)");
  };
  std::string_view addr = text, len;
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    addr = text.substr(0, slash);
    len = text.substr(slash + 1);
  }
  boost::system::error_code ec;
  ip::address a = ip::make_address(std::string(addr), ec);
  if (ec) return bad();
  a = unmapped(a);
  unsigned max = a.is_v4() ? 32 : 128, prefix = max;
  if (!len.empty()) {
    auto [end, err] = std::from_chars(len.data(), len.data() + len.size(), prefix);
    if (err != std::errc() || end != len.data() + len.size() || prefix > max) return bad();
  } else if (text.find('/') != std::string_view::npos) {
    return bad();
  }
  return Cidr{a, prefix};
}

void DestinationPolicy::add_own_listener(ip::address address, uint16_t port) {
  std::lock_guard<std::mutex> lock(mu_);
  own_.push_back({unmapped(address), port});
}

bool DestinationPolicy::is_own_listener(const ip::address& a, uint16_t port) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Listener& l : own_) {
    if (l.port != port) continue;
    if (l.address.is_unspecified() ? is_local_address(a) : l.address == a) return true;
  }
  return false;
}

Status DestinationPolicy::check(const ip::address& raw, uint16_t port) const {
  const ip::address a = unmapped(raw);
  if (is_own_listener(a, port))
    return Error::invalid("/source", a.to_string() + ":" + std::to_string(port) + " is kilnd's own API");
  for (const Cidr& c : allowed_)
    if (c.contains(a)) return ok_status();
  const char* why = nullptr;
  if (a.is_loopback()) why = "a loopback address";
  else if (a.is_unspecified()) why = "an unspecified address";
  else if (a.is_multicast()) why = "a multicast address";
  else if (is_metadata(a)) why = "a cloud metadata address";
  else if (a.is_v4() && (a.to_v4().to_bytes()[0] == 169 && a.to_v4().to_bytes()[1] == 254))
    why = "a link-local address (metadata services live there)";
  else if (a.is_v4() && a.to_v4() == ip::address_v4::broadcast()) why = "the broadcast address";
  else if (a.is_v4() && a.to_v4().to_bytes()[0] == 0) why = "an unspecified address";
  else if (a.is_v6() && a.to_v6().is_link_local()) why = "a link-local address";
  if (why == nullptr) return ok_status();
  return Error::invalid("/source", a.to_string() + " is " + why +
                                       ", which kilnd does not download from; an operator may allow it with "
                                       "--image-url-allow CIDR");
}

}  // namespace kiln::boot
