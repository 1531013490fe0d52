#pragma once
// The plan of a kiln-vbmc fleet: which BMC lives where, with which
// credentials and which injected faults, and the manifest JSON a script reads
// to enroll them. Pure functions of FleetOptions (deterministic in `seed`),
// so tests can check the plan without sockets.
//
// Addresses: BMC i answers on address_base + i (127.0.0.0/8 is loopback on
// Linux: binding 127.2.0.7 needs no set-up and no root), IPMI on one UDP
// port and Redfish on one HTTPS port shared by all addresses. Each BMC thus
// looks like its own endpoint (its own address) to a driver, as real BMCs on
// a management LAN do.
//
// Faults per BMC, chosen as fractions of the fleet (disjoint sets, exact
// counts: round(fraction * N), drawn by a seeded shuffle) and/or by index:
//   dead      answers nothing (IPMI datagrams ignored, HTTP requests held)
//   lockout   the account is locked: every login refused (IPMI RAKP 2
//             status 0x0D, Redfish 401), as after repeated wrong passwords
//   http_500  every Redfish request answers 500 InternalError (Redfish only)
//   latency   every answer is delayed by fault_latency
// and for the whole fleet: drop_fraction of IPMI datagrams (each direction)
// are lost, drawn per BMC from a PRNG seeded with seed and the BMC's index.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace kiln::vbmc {

struct FleetOptions {
  std::size_t count = 0;  // 0 = not fleet mode
  bool ipmi = true;
  bool redfish = true;
  std::string manifest_path;
  // First BMC's address; the fleet must fit below 127.255.255.255.
  std::string address_base = "127.2.0.1";
  uint16_t ipmi_port = 0;     // 0 = one picked at start (the same on every address)
  uint16_t redfish_port = 0;  // 0 = one picked at start
  uint64_t seed = 1;
  std::string user = "admin";
  // Empty: every BMC gets its own generated password (listed in the manifest).
  std::string password;
  std::chrono::milliseconds fault_latency{0};
  double latency_fraction = 0;
  double http500_fraction = 0;
  double lockout_fraction = 0;
  double dead_fraction = 0;
  double drop_fraction = 0;  // of IPMI datagrams, at every BMC
  // Faults by BMC index: {"dead", 3}, {"lockout", 17}, ...
  std::vector<std::pair<std::string, std::size_t>> fault_bmcs;
};

struct FleetBmc {
  std::size_t index = 0;
  std::string name;     // "bmc-00042"
  std::string address;  // "127.2.0.43"
  std::string username;
  std::string password;
  bool dead = false;
  bool lockout = false;
  bool http500 = false;
  bool latency = false;
};

// True for the fault names FleetOptions::fault_bmcs accepts.
bool is_fleet_fault_kind(const std::string& kind);

// Errors: kInvalidArgument when the address range leaves 127.0.0.0/8, the
// fault fractions add up past 1, or a fault names an unknown kind or index.
Result<std::vector<FleetBmc>> plan_fleet(const FleetOptions& opts);

// The manifest: one entry per BMC and protocol,
//   {"name", "protocol": "ipmi"|"redfish", "address", "port", "username",
//    "password", "system_id" (redfish), "faults": ["dead", "latency_ms=50",
//    "drop=0.05", ...]}
// listing only the faults that affect that protocol.
nlohmann::json fleet_manifest(const std::vector<FleetBmc>& bmcs, const FleetOptions& opts,
                              uint16_t ipmi_port, uint16_t redfish_port);

}  // namespace kiln::vbmc
