#include "agent/inventory/addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>

#include "common/machine_values.h"

namespace kiln::agent {

std::vector<std::string> reachable_addresses(const std::vector<InterfaceAddress>& all) {
  std::vector<std::string> v4;
  std::vector<std::string> v6;
  for (const InterfaceAddress& ia : all) {
    if (!ia.up || ia.loopback || is_loopback_or_link_local(ia.address)) continue;
    // kilnd refuses a heartbeat with an address it cannot parse (an
    // IPv4-mapped one, say): leave such an address out rather than lose
    // every other one with it. Canonical text, so duplicates compare equal.
    Result<std::string> a = parse_ip_address(ia.address);
    if (!a) continue;
    std::vector<std::string>& into = a->find(':') == std::string::npos ? v4 : v6;
    if (std::find(into.begin(), into.end(), *a) == into.end()) into.push_back(*a);
  }
  v4.insert(v4.end(), v6.begin(), v6.end());
  return v4;
}

std::vector<InterfaceAddress> read_interface_addresses() {
  std::vector<InterfaceAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr);
    if (inet_ntop(family, raw, text, sizeof(text)) == nullptr) continue;
    InterfaceAddress ia;
    ia.interface = i->ifa_name != nullptr ? i->ifa_name : "";
    ia.address = text;
    ia.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    ia.up = (i->ifa_flags & IFF_UP) != 0;
    out.push_back(std::move(ia));
  }
  freeifaddrs(list);
  return out;
}

}  // namespace kiln::agent
