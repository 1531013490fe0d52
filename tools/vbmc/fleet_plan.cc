#include "tools/vbmc/fleet_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include <boost/asio/ip/address_v4.hpp>

#include "tools/vbmc/fleet_backend.h"

namespace kiln::vbmc {

namespace {

std::string hex_password(std::mt19937_64& rng) {
  static const char* const kHex = "0123456789abcdef";
  std::string out = "pw-";
  uint64_t v = rng();
  for (int i = 0; i < 12; ++i, v >>= 4) out.push_back(kHex[v & 0xF]);
  return out;
}

std::string fraction_text(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

}  // namespace

bool is_fleet_fault_kind(const std::string& kind) {
  return kind == "dead" || kind == "lockout" || kind == "http_500" || kind == "latency";
}

Result<std::vector<FleetBmc>> plan_fleet(const FleetOptions& o) {
  boost::system::error_code ec;
  const auto base = boost::asio::ip::make_address_v4(o.address_base, ec);
  if (ec) return Error(Code::kInvalidArgument, "--fleet-address-base: not an IPv4 address: " + o.address_base);
  const uint64_t first = base.to_uint();
  const uint64_t last = first + (o.count == 0 ? 0 : o.count - 1);
  if ((first >> 24) != 127 || last >= 0x7FFFFFFFULL || (first & 0xFFFFFF) == 0) {
    return Error(Code::kInvalidArgument,
                 "--fleet-address-base: the fleet's addresses must lie inside 127.0.0.1-127.255.255.254");
  }
  for (double f : {o.latency_fraction, o.http500_fraction, o.lockout_fraction, o.dead_fraction,
                   o.drop_fraction}) {
    if (!(f >= 0.0 && f <= 1.0)) return Error(Code::kInvalidArgument, "fault fractions must be in 0..1");
  }
  const auto share = [&](double f) {
    return static_cast<std::size_t>(std::llround(f * static_cast<double>(o.count)));
  };
  const std::size_t n_dead = share(o.dead_fraction);
  const std::size_t n_lockout = share(o.lockout_fraction);
  const std::size_t n_500 = share(o.http500_fraction);
  const std::size_t n_latency = share(o.latency_fraction);
  if (n_dead + n_lockout + n_500 + n_latency > o.count) {
    return Error(Code::kInvalidArgument,
                 "the dead, lockout, 500 and latency fractions add up to more than the fleet");
  }

  std::mt19937_64 rng(o.seed);
  std::vector<FleetBmc> bmcs(o.count);
  for (std::size_t i = 0; i < o.count; ++i) {
    FleetBmc& b = bmcs[i];
    b.index = i;
    char name[32];
    std::snprintf(name, sizeof name, "bmc-%05zu", i);
    b.name = name;
    b.address = boost::asio::ip::address_v4(static_cast<uint32_t>(first + i)).to_string();
    b.username = o.user;
    b.password = o.password.empty() ? hex_password(rng) : o.password;
  }
  // A seeded shuffle, then disjoint slices: exact counts, reproducible sets.
  std::vector<std::size_t> order(o.count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  std::size_t at = 0;
  for (std::size_t k = 0; k < n_dead; ++k) bmcs[order[at++]].dead = true;
  for (std::size_t k = 0; k < n_lockout; ++k) bmcs[order[at++]].lockout = true;
  for (std::size_t k = 0; k < n_500; ++k) bmcs[order[at++]].http500 = true;
  for (std::size_t k = 0; k < n_latency; ++k) bmcs[order[at++]].latency = true;

  for (const auto& f : o.fault_bmcs) {
    if (f.second >= o.count) {
      return Error(Code::kInvalidArgument, "--fault-bmc: index " + std::to_string(f.second) +
                                               " is outside the fleet of " + std::to_string(o.count));
    }
    FleetBmc& b = bmcs[f.second];
    if (f.first == "dead") b.dead = true;
    else if (f.first == "lockout") b.lockout = true;
    else if (f.first == "http_500") b.http500 = true;
    else if (f.first == "latency") b.latency = true;
    else return Error(Code::kInvalidArgument, "--fault-bmc: unknown fault " + f.first);
  }
  return bmcs;
}

nlohmann::json fleet_manifest(const std::vector<FleetBmc>& bmcs, const FleetOptions& o,
                              uint16_t ipmi_port, uint16_t redfish_port) {
  nlohmann::json out = nlohmann::json::array();
  const std::string latency = "latency_ms=" + std::to_string(o.fault_latency.count());
  for (const FleetBmc& b : bmcs) {
    if (o.ipmi) {
      nlohmann::json faults = nlohmann::json::array();
      if (b.dead) faults.push_back("dead");
      if (b.lockout) faults.push_back("lockout");
      if (b.latency) faults.push_back(latency);
      if (o.drop_fraction > 0) faults.push_back("drop=" + fraction_text(o.drop_fraction));
      out.push_back({{"name", b.name},
                     {"protocol", "ipmi"},
                     {"address", b.address},
                     {"port", ipmi_port},
                     {"username", b.username},
                     {"password", b.password},
                     {"faults", faults}});
    }
    if (o.redfish) {
      nlohmann::json faults = nlohmann::json::array();
      if (b.dead) faults.push_back("dead");
      if (b.lockout) faults.push_back("lockout");
      if (b.http500) faults.push_back("http_500");
      if (b.latency) faults.push_back(latency);
      out.push_back({{"name", b.name},
                     {"protocol", "redfish"},
                     {"address", b.address},
                     {"port", redfish_port},
                     {"username", b.username},
                     {"password", b.password},
                     {"system_id", FleetBackend::fleet_machine_id(b.index)},
                     {"faults", faults}});
    }
  }
  return out;
}

}  // namespace kiln::vbmc
