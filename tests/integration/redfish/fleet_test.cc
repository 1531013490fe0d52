// The Redfish driver against a kiln-vbmc fleet: what it keeps between sweeps
// of many BMCs. Every BMC of the fleet is its own loopback address behind one
// HTTPS listener (tools/vbmc/fleet.h), as BMCs are on a management network.
// What stays open is read from the kernel (this process's sockets in
// /proc/self/net/tcp), not from the client's own counters; the sessions each
// BMC holds are read from the BMC.

#include <utility>  // before Asio

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "drivers/redfish/redfish_driver.h"
#include "tests/integration/redfish/driver_harness.h"
#include "tests/support/heap_in_use.h"
#include "tests/support/http_test_client.h"
#include "tests/support/vbmc_child.h"

namespace {

using namespace kiln;
using nlohmann::json;
namespace asio = boost::asio;

// This process's TCP connections (IPv4) in state ESTABLISHED to `port`.
std::size_t established_to(uint16_t port) {
  std::set<std::string> mine;  // socket inodes behind this process's descriptors
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) mine.insert(target.substr(8, target.size() - 9));
  }
  std::ifstream tcp("/proc/self/net/tcp");
  std::string line;
  std::getline(tcp, line);  // the header
  std::size_t n = 0;
  while (std::getline(tcp, line)) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    std::istringstream fields(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
    fields >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    const auto colon = remote.find(':');
    if (colon == std::string::npos || state != "01") continue;
    if (std::stoul(remote.substr(colon + 1), nullptr, 16) == port && mine.count(inode)) ++n;
  }
  return n;
}

// A kiln-vbmc fleet of Redfish BMCs and the driver targets for them.
struct RedfishFleet {
  explicit RedfishFleet(std::size_t count)
      : manifest_path(std::filesystem::temp_directory_path() /
                      ("kiln-redfish-fleet-" + std::to_string(::getpid()) + ".json")),
        vbmc({"--fleet", std::to_string(count), "--fleet-manifest", manifest_path.string(),
              "--fleet-protocols", "redfish", "--fleet-address-base", "127.14.0.1", "--log-level", "error"},
             {"fleet ready: "}) {
    std::ifstream in(manifest_path);
    manifest = json::parse(in, nullptr, false);
    std::filesystem::remove(manifest_path);
    REQUIRE(manifest.is_array());
    REQUIRE(manifest.size() == count);
    port = static_cast<uint16_t>(manifest[0]["port"].get<int>());
    for (const json& e : manifest) {
      DriverTarget t;
      t.node_id = e["name"].get<std::string>();
      t.bmc.driver = "redfish";
      t.bmc.address = "https://" + e["address"].get<std::string>() + ":" + std::to_string(port);
      t.bmc.username = e["username"].get<std::string>();
      t.bmc.system_id = e["system_id"].get<std::string>();
      t.bmc.verify_tls = false;
      t.password = e["password"].get<std::string>();
      targets.push_back(std::move(t));
    }
  }

  // How many sessions the BMC of manifest entry `i` holds, asked with Basic
  // auth on a connection of its own.
  std::size_t sessions_of(std::size_t i) {
    const json& e = manifest[i];
    testing::HttpTestClient c(e["address"].get<std::string>(), port, true);
    const std::string basic = e["username"].get<std::string>() + ":" + e["password"].get<std::string>();
    auto r = c.request("GET", "/redfish/v1/SessionService/Sessions", {},
                       {{"Authorization", "Basic " + base64_encode(basic)}});
    REQUIRE(r.status == 200);
    return json::parse(r.body)["Members"].size();
  }

  std::filesystem::path manifest_path;
  testing::VbmcChild vbmc;
  json manifest;
  uint16_t port = 0;
  std::vector<DriverTarget> targets;
};

// A driver on `io` that keeps at most `max_idle` connections between sweeps.
std::unique_ptr<Driver> fleet_driver(asio::io_context& io, std::size_t max_idle) {
  RedfishDriverOptions o = testing::fast_options();
  o.max_idle_connections = max_idle;
  o.logout_timeout = std::chrono::seconds(10);  // a loaded CI machine; returns as soon as all are out
  return make_redfish_driver(io.get_executor(), o, Logger(LogLevel::kWarn));
}

// Reads every target's power state at once, as a power sync sweep does;
// returns how many answered, and their answers in `states` when given.
std::size_t sweep(asio::io_context& io, Driver& driver, const std::vector<DriverTarget>& targets,
                  std::vector<PowerState>* states = nullptr) {
  std::vector<PowerState> seen(targets.size(), PowerState::kUnknown);
  std::size_t ok = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    asio::co_spawn(
        io,
        [&driver, &t = targets[i], &slot = seen[i], &ok]() -> asio::awaitable<void> {
          Result<PowerState> r = co_await driver.power->get_power_state(t);
          if (!r) co_return;
          ++ok;
          slot = *r;
        },
        asio::detached);
  }
  io.restart();
  io.run();
  if (states) *states = std::move(seen);
  return ok;
}

TEST_CASE("fleet sweeps: at most max_idle_connections stay open, the next sweep resumes TLS and keeps the sessions",
          "[redfish][fleet]") {
  constexpr std::size_t kBmcs = 48;
  constexpr std::size_t kIdle = 8;
  RedfishFleet fleet(kBmcs);
  asio::io_context io;
  std::unique_ptr<Driver> driver = fleet_driver(io, kIdle);

  REQUIRE(sweep(io, *driver, fleet.targets) == kBmcs);
  const http::ClientStats first = redfish_driver_stats(*driver).connections;
  CHECK(established_to(fleet.port) <= kIdle);
  CHECK(first.idle_connections <= kIdle);
  CHECK(first.tls_handshakes == kBmcs);
  CHECK(first.tls_resumed == 0);
  CHECK(first.tls_contexts == 1);  // every BMC's connections share one SSL_CTX
  // What an idle BMC holds besides its Redfish session: one TLS session, no
  // connection beyond the fleet-wide bound.
  CHECK(first.tls_sessions == kBmcs);

  REQUIRE(sweep(io, *driver, fleet.targets) == kBmcs);
  const http::ClientStats second = redfish_driver_stats(*driver).connections;
  CHECK(established_to(fleet.port) <= kIdle);
  CHECK(second.idle_connections <= kIdle);
  CHECK(second.tls_sessions == kBmcs);
  // A BMC whose connection was closed opens a new one, and resumes its TLS
  // session on it: every handshake of this sweep was a resumption.
  const uint64_t handshakes = second.tls_handshakes - first.tls_handshakes;
  CHECK(handshakes >= kBmcs - kIdle);
  CHECK(second.tls_resumed - first.tls_resumed == handshakes);

  // The Redfish sessions outlived their connections: no BMC was logged in to
  // twice (the driver deletes its sessions only when it goes).
  for (std::size_t i : {std::size_t{0}, kBmcs / 2, kBmcs - 1}) CHECK(fleet.sessions_of(i) == 1);

  driver.reset();
  CHECK(fleet.sessions_of(0) == 0);
}

TEST_CASE("fleet sweeps: with room for every BMC's connection, the next sweep makes no handshake and a BMC costs under 40 KiB",
          "[redfish][fleet]") {
  constexpr std::size_t kBmcs = 48;
  RedfishFleet fleet(kBmcs);
  asio::io_context io;
  std::unique_ptr<Driver> driver = fleet_driver(io, kBmcs);

  const std::size_t before = testing::heap_in_use_bytes();
  REQUIRE(sweep(io, *driver, fleet.targets) == kBmcs);
  const std::size_t after_first = testing::heap_in_use_bytes();
  const http::ClientStats first = redfish_driver_stats(*driver).connections;
  CHECK(first.idle_connections == kBmcs);
  CHECK(established_to(fleet.port) == kBmcs);
  // Everything the driver keeps for a BMC between sweeps: its TLS connection
  // (about 20 KiB, mostly OpenSSL's SSL object and the BMC's certificate: no
  // record buffers while idle, where asio::ssl::stream keeps four of 17 KiB),
  // its TLS session, its Redfish session and cached discovery.
  const std::size_t per_bmc = (after_first - std::min(after_first, before)) / kBmcs;
  CAPTURE(per_bmc);
  CHECK(per_bmc < 40 * 1024);

  REQUIRE(sweep(io, *driver, fleet.targets) == kBmcs);
  const http::ClientStats second = redfish_driver_stats(*driver).connections;
  CHECK(second.tls_handshakes == first.tls_handshakes);  // every BMC asked on its open connection
  CHECK(second.idle_connections == kBmcs);
  CHECK(established_to(fleet.port) == kBmcs);
  // A sweep on open connections leaves nothing behind.
  const std::size_t after_second = testing::heap_in_use_bytes();
  CAPTURE(after_first, after_second);
  CHECK(after_second < after_first + kBmcs * 1024);
}

TEST_CASE("fleet sweeps: replies at or over parse_inline_limit are parsed off the I/O thread and read the same",
          "[redfish][fleet]") {
  constexpr std::size_t kBmcs = 4;
  RedfishFleet fleet(kBmcs);
  std::vector<PowerState> inline_states, off_thread_states;
  for (const std::size_t limit : {std::size_t{1} << 20, std::size_t{1}}) {
    RedfishDriverOptions o = testing::fast_options();
    o.parse_inline_limit = limit;
    o.logout_timeout = std::chrono::seconds(10);  // a loaded CI machine; returns as soon as all are out
    asio::io_context io;
    std::unique_ptr<Driver> driver = make_redfish_driver(io.get_executor(), o, Logger(LogLevel::kWarn));
    std::vector<PowerState>& states = limit == 1 ? off_thread_states : inline_states;
    REQUIRE(sweep(io, *driver, fleet.targets, &states) == kBmcs);
    REQUIRE(sweep(io, *driver, fleet.targets, &states) == kBmcs);
    const uint64_t off_thread = redfish_driver_stats(*driver).bodies_parsed_off_thread;
    if (limit == 1) {
      // Per BMC: the service root, the login answer, Systems and the system,
      // then the system again.
      CHECK(off_thread >= 5 * kBmcs);
    } else {
      CHECK(off_thread == 0);  // kiln-vbmc's replies are a few KiB
    }
  }
  CHECK(off_thread_states == inline_states);
  for (PowerState p : inline_states) CHECK(p != PowerState::kUnknown);
}

TEST_CASE("fleet sweeps: a power change shows in the next sweep, through the fleet's kept system bodies and the driver's PowerState-only reads",
          "[redfish][fleet]") {
  constexpr std::size_t kBmcs = 4;
  RedfishFleet fleet(kBmcs);
  asio::io_context io;
  std::unique_ptr<Driver> driver = fleet_driver(io, kBmcs);
  std::vector<PowerState> before, after;
  REQUIRE(sweep(io, *driver, fleet.targets, &before) == kBmcs);
  // Twice: the second sweep reads systems the driver has found already,
  // answered from bodies the fleet has built already.
  REQUIRE(sweep(io, *driver, fleet.targets, &before) == kBmcs);
  REQUIRE(before[1] != PowerState::kUnknown);
  const PowerAction flip = before[1] == PowerState::kOn ? PowerAction::kOff : PowerAction::kOn;
  Status changed = Error(Code::kInternal, "not run");
  asio::co_spawn(
      io, [&]() -> asio::awaitable<void> { changed = co_await driver->power->set_power_state(fleet.targets[1], flip); },
      asio::detached);
  io.restart();
  io.run();
  REQUIRE(changed);
  REQUIRE(sweep(io, *driver, fleet.targets, &after) == kBmcs);
  CHECK(after[1] == (before[1] == PowerState::kOn ? PowerState::kOff : PowerState::kOn));
  for (std::size_t i : {std::size_t{0}, std::size_t{2}, std::size_t{3}}) CHECK(after[i] == before[i]);
}

}  // namespace
