#pragma once
// DriverHarness: one Redfish driver on a private io_context, pointed at a
// kiln-vbmc child process, one call at a time; and the kiln-vbmc arguments
// and driver timeouts the Redfish integration tests share. Test-only.

#include <utility>  // before Asio

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "drivers/redfish/redfish_driver.h"
#include "tests/integration/redfish/vbmc_process.h"

namespace kiln::testing {

inline const std::string kUser = "admin";
inline const std::string kPassword = "s3cret";

inline std::vector<std::string> vbmc_args(std::vector<std::string> extra) {
  std::vector<std::string> a = {"--redfish-listen", "127.0.0.1:0", "--user", kUser, "--password", kPassword,
                                "--log-level", "warn"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline RedfishDriverOptions fast_options() {
  RedfishDriverOptions o;
  o.request_timeout = std::chrono::seconds(5);
  o.command_deadline = std::chrono::seconds(20);
  o.inspect_deadline = std::chrono::seconds(60);
  o.power_timeout = std::chrono::seconds(10);
  o.poll_interval = std::chrono::milliseconds(50);
  return o;
}

// Drives one Redfish driver on a private io_context, one call at a time.
struct DriverHarness {
  boost::asio::io_context io;
  std::unique_ptr<Driver> driver;
  DriverTarget target;

  DriverHarness(const VbmcProcess& v, std::string password = kPassword,
                RedfishDriverOptions o = fast_options()) {
    driver = make_redfish_driver(io.get_executor(), o, Logger(LogLevel::kWarn));
    target.node_id = "node-1";
    target.bmc.driver = "redfish";
    target.bmc.address = v.url();
    target.bmc.username = kUser;
    target.bmc.verify_tls = false;
    target.password = std::move(password);
    target.boot_mode = "uefi";
  }
  ~DriverHarness() { driver.reset(); }  // logs out of the session

  template <typename T>
  T run(boost::asio::awaitable<T> op) {
    auto f = boost::asio::co_spawn(io, std::move(op), boost::asio::use_future);
    io.restart();
    io.run();
    return f.get();
  }
  Status verify() { return run(driver->management->verify(target)); }
  Result<PowerState> power() { return run(driver->power->get_power_state(target)); }
  Status set_power(PowerAction a) { return run(driver->power->set_power_state(target, a)); }
  Status boot(BootDevice d, bool persistent) {
    return run(driver->management->set_boot_device(target, d, persistent));
  }
  Result<nlohmann::json> inspect() { return run(driver->inspect->inspect(target)); }
};

}  // namespace kiln::testing
