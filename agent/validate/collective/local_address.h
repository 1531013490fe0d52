#pragma once
// Which of this node's IPv4 addresses faces kilnd: the address the tcp
// collective's root listens on and names in its unique id, because peers
// reach the root over the same network the agents reach kilnd over (the only
// one kilnd knows exists). Asks the kernel's routing table: connect() a UDP
// socket to the API's host:port (no packet is sent) and read getsockname().

#include <string>

#include "common/result.h"

namespace kiln::agent {

// The local IPv4 address ("10.77.0.123") for reaching `api_url`
// ("http://host[:port]/..."); a name is resolved with getaddrinfo (IPv4
// only). An API on 127.0.0.1 gives 127.0.0.1. Blocking (name resolution).
// Errors: kInvalidArgument for a malformed URL, kNotFound when the host has
// no IPv4 address, kUnavailable when there is no route to it.
Result<std::string> local_ipv4_towards(const std::string& api_url);

}  // namespace kiln::agent
