#pragma once
// VbmcProcess: kiln-vbmc serving Redfish for a test (tests/support/vbmc_child.h
// starts and stops it). The constructor waits up to 20 s for the "redfish
// listening on https://HOST:PORT" line and throws std::runtime_error when it
// does not come or the process exits.

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/vbmc_child.h"

namespace kiln::testing {

class VbmcProcess {
 public:
  explicit VbmcProcess(std::vector<std::string> args)
      : child_(std::move(args), {kLine}, std::chrono::seconds(20)), port_(child_.port_of(kLine)) {}

  uint16_t port() const { return port_; }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }

 private:
  static constexpr const char* kLine = "redfish listening on https://";
  VbmcChild child_;
  uint16_t port_ = 0;
};

}  // namespace kiln::testing
