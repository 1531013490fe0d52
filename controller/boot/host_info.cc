#include "controller/boot/host_info.h"

#include <arpa/inet.h>
#include <grp.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pwd.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace kiln::boot {

std::optional<std::string> interface_ipv4(const std::string& interface) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> out;
  for (ifaddrs* a = list; a != nullptr && !out; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if (interface != a->ifa_name) continue;
    char buf[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf) != nullptr) out = std::string(buf);
  }
  ::freeifaddrs(list);
  return out;
}

std::string current_user_name() {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return "";
  return found->pw_name;
}

std::string current_group_name() {
  std::vector<char> buf(16384);
  group gr{};
  group* found = nullptr;
  if (::getgrgid_r(::getegid(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) return "";
  return found->gr_name;
}

}  // namespace kiln::boot
