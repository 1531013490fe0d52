#include "bench/soak/bmc_fleet.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "bench/soak/wall_clock.h"
#include "tests/support/vbmc_child.h"

namespace kiln::soak {

namespace {

// Which BMC carries which standing fault; the others are healthy.
const std::vector<std::pair<std::string, std::size_t>> kStandingFaults = {
    {"latency", 2}, {"http_500", 3}, {"dead", 4}, {"lockout", 5}};

// Longer than the 2 s request timeout the soak gives its Redfish nodes.
constexpr const char* kLatencyMs = "3000";

}  // namespace

BmcFleet::BmcFleet(std::size_t count, uint64_t seed) {
  if (count < 8) throw std::invalid_argument("a soak fleet needs at least 8 BMCs");
  char tmpl[] = "/tmp/kiln-soak-fleet-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  const std::string manifest = dir_ + "/manifest.json";
  std::vector<std::string> args = {"--fleet", std::to_string(count), "--fleet-manifest", manifest,
                                   "--fleet-protocols", "redfish", "--fleet-address-base", "127.77.0.1",
                                   "--seed", std::to_string(seed), "--password", "soak-bmc-password",
                                   "--fault-latency-ms", kLatencyMs, "--log-level", "warn"};
  for (const auto& [kind, index] : kStandingFaults) {
    args.push_back("--fault-bmc");
    args.push_back(kind + "=" + std::to_string(index));
  }
  child_ = std::make_unique<testing::VbmcChild>(args, std::vector<std::string>{"fleet ready: "});
  std::ifstream in(manifest);
  nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
  if (!m.is_array()) throw std::runtime_error("kiln-vbmc wrote no manifest at " + manifest);
  for (const nlohmann::json& e : m) {
    FleetBmc b;
    b.name = e.at("name").get<std::string>();
    b.address = "https://" + e.at("address").get<std::string>() + ":" + std::to_string(e.at("port").get<int>());
    b.username = e.at("username").get<std::string>();
    b.password = e.at("password").get<std::string>();
    b.system_id = e.at("system_id").get<std::string>();
    // The manifest names each BMC's faults ("dead", "latency_ms=3000", ...).
    for (const nlohmann::json& f : e.value("faults", nlohmann::json::array())) {
      const std::string kind = f.get<std::string>();
      b.fault = kind.rfind("latency", 0) == 0 ? "latency" : kind;
    }
    bmcs_.push_back(std::move(b));
  }
}

BmcFleet::~BmcFleet() {
  resume();  // a stopped process would sit on the SIGTERM until the SIGKILL
  child_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

pid_t BmcFleet::pid() const { return child_->pid(); }

void BmcFleet::pause() {
  if (paused_) return;
  ::kill(child_->pid(), SIGSTOP);
  paused_ = true;
  ++pauses_;
  paused_since_ms_ = wall_ms();
}

void BmcFleet::resume() {
  if (!paused_) return;
  ::kill(child_->pid(), SIGCONT);
  paused_ = false;
  paused_total_ms_ += wall_ms() - paused_since_ms_;
}

double BmcFleet::paused_seconds() const {
  return static_cast<double>(paused_total_ms_ + (paused_ ? wall_ms() - paused_since_ms_ : 0)) / 1000.0;
}

}  // namespace kiln::soak
