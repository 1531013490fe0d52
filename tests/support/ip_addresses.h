#pragma once
// This machine's global addresses on up interfaces as ip(8) lists them: the
// independent record the tests of the agent's address reporting compare with.

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli_run.h"

namespace kiln::test {

// nullopt when ip(8) cannot be run.
inline std::optional<std::vector<std::string>> ip_global_addresses() {
  CommandRun ip = run_command("ip -o addr show up scope global 2>/dev/null");
  if (ip.status != 0) return std::nullopt;
  // "2: eth0    inet 192.0.2.2/24 brd ... scope global eth0 ..." -> 192.0.2.2
  std::vector<std::string> out;
  std::istringstream lines(ip.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string index, ifname, family, cidr;
    words >> index >> ifname >> family >> cidr;
    if (family == "inet" || family == "inet6") out.push_back(cidr.substr(0, cidr.find('/')));
  }
  return out;
}

}  // namespace kiln::test
