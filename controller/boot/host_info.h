#pragma once
// Facts about the host that PXE set-up needs: an interface's IPv4 address
// (the default --pxe-address) and the account kilnd runs as (dnsmasq keeps
// running as it, so it can read kilnd's data dir).

#include <optional>
#include <string>

namespace kiln::boot {

// The first IPv4 address of `interface` ("10.77.0.1"), nullopt when it has none.
std::optional<std::string> interface_ipv4(const std::string& interface);
// Names of the effective user and group ("root"); "" when unknown.
std::string current_user_name();
std::string current_group_name();

}  // namespace kiln::boot
