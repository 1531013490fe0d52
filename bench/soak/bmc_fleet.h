#pragma once
// BmcFleet: the Redfish BMCs of the soak's kiln-vbmc nodes, and their faults.
//
// One `kiln-vbmc --fleet N` child (tests/support/vbmc_child.h), Redfish only,
// BMC i at its own loopback address (127.77.0.1 + i). Faults come two ways,
// both through kiln-vbmc:
//   * standing ones, chosen at start by BMC index (fleet_plan.h): a BMC whose
//     every answer comes after 3 s (each call of a 2 s driver times out), one
//     that answers every request 500 (power actions fail), one that answers
//     nothing (held requests: timeouts), one whose account is locked (401);
//   * pauses: pause() stops the whole kiln-vbmc process (SIGSTOP), so every
//     BMC stops answering mid-call, and resume() lets it go on (SIGCONT).
//
// Not thread-safe: the soak's driving thread owns it. The destructor resumes
// a paused fleet before stopping it.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::testing {
class VbmcChild;
}

namespace kiln::soak {

// One BMC as a node's bmc section wants it, and the standing fault it has.
struct FleetBmc {
  std::string name;
  std::string address;  // https://127.77.0.N:PORT
  std::string username, password, system_id;
  std::string fault;  // "", "latency", "http_500", "dead", "lockout"
};

class BmcFleet {
 public:
  // Starts `count` BMCs (at least 8: four healthy, one of each fault).
  // Throws std::runtime_error when kiln-vbmc does not come up.
  BmcFleet(std::size_t count, uint64_t seed);
  ~BmcFleet();
  BmcFleet(const BmcFleet&) = delete;
  BmcFleet& operator=(const BmcFleet&) = delete;

  const std::vector<FleetBmc>& bmcs() const { return bmcs_; }
  pid_t pid() const;

  void pause();
  void resume();
  bool paused() const { return paused_; }
  int pauses() const { return pauses_; }
  // Total seconds the fleet has been paused.
  double paused_seconds() const;

 private:
  std::string dir_;
  std::unique_ptr<testing::VbmcChild> child_;
  std::vector<FleetBmc> bmcs_;
  bool paused_ = false;
  int pauses_ = 0;
  int64_t paused_since_ms_ = 0;
  int64_t paused_total_ms_ = 0;
};

}  // namespace kiln::soak
