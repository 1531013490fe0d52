#include "agent/validate/collective/local_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/net/http_client.h"

namespace kiln::agent {

Result<std::string> local_ipv4_towards(const std::string& api_url) {
  auto url = Url::parse(api_url);
  if (!url) return url.take_error();

  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(url->port);
  if (int rc = getaddrinfo(url->host.c_str(), port.c_str(), &hints, &found); rc != 0 || !found)
    return Error(Code::kNotFound, "no IPv4 address for " + url->host + ": " + gai_strerror(rc));

  std::string why = "no address of " + url->host + " is routable";
  std::string local;
  for (addrinfo* ai = found; ai && local.empty(); ai = ai->ai_next) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    // A UDP connect only picks the route and source address.
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
      sockaddr_in self{};
      socklen_t len = sizeof self;
      char text[INET_ADDRSTRLEN] = {};
      if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
          inet_ntop(AF_INET, &self.sin_addr, text, sizeof text))
        local = text;
      else
        why = std::string("getsockname: ") + std::strerror(errno);
    } else {
      why = "no route to " + url->host + ": " + std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (local.empty()) return Error(Code::kUnavailable, why);
  return local;
}

}  // namespace kiln::agent
