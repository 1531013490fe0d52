#include "drivers/ipmi/ipmi_driver.h"

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/strand_mutex.h"
#include "drivers/ipmi/commands.h"
#include "drivers/ipmi/session.h"

namespace kiln {
namespace {

using ipmi::IpmiResponse;
using ipmi::IpmiSession;
using ipmi::SteadyClock;
using std::chrono::milliseconds;

// The options in force for one node: driver defaults overridden by bmc.options.
struct NodeSettings {
  ipmi::SessionConfig session;
  milliseconds power_timeout{60000};
};

Result<int> int_option(const nlohmann::json& opts, const char* key, int lo, int hi, int fallback) {
  if (!opts.is_object() || !opts.contains(key)) return fallback;
  const auto& v = opts.at(key);
  const std::string field = std::string("/bmc/options/") + key;
  if (!v.is_number_integer()) return Error::invalid(field, "must be an integer");
  const auto n = v.get<int64_t>();
  if (n < lo || n > hi) {
    return Error::invalid(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return static_cast<int>(n);
}

// Validates the node's BMC fields and builds its settings. No I/O.
Result<NodeSettings> settings_for(const BmcInfo& bmc, const std::string& password,
                                  const IpmiDriverOptions& o) {
  auto ep = ipmi::parse_bmc_address(bmc.address);
  if (!ep) return ep.error();
  if (bmc.username.size() > 16) {
    return Error::invalid("/bmc/username", "IPMI user names are at most 16 bytes");
  }
  if (password.size() > 20) {
    return Error::invalid("/bmc/password", "IPMI v2.0 passwords are at most 20 bytes");
  }
  if (!bmc.options.is_null() && !bmc.options.is_object()) {
    return Error::invalid("/bmc/options", "must be an object");
  }
  auto suite_id = int_option(bmc.options, "cipher_suite", 0, 255, o.cipher_suite);
  if (!suite_id) return suite_id.error();
  auto suite = ipmi::cipher_suite(*suite_id);
  if (!suite) return suite.error();
  auto retries = int_option(bmc.options, "retries", 0, 10, o.retries);
  if (!retries) return retries.error();
  auto timeout = int_option(bmc.options, "timeout_ms", 50, 60000,
                            static_cast<int>(o.request_timeout.count()));
  if (!timeout) return timeout.error();
  auto power = int_option(bmc.options, "power_timeout_ms", 1000, 3600000,
                          static_cast<int>(o.power_timeout.count()));
  if (!power) return power.error();
  auto spacing = int_option(bmc.options, "min_spacing_ms", 0, 10000,
                            static_cast<int>(o.min_command_spacing.count()));
  if (!spacing) return spacing.error();

  NodeSettings s;
  s.session.endpoint = *ep;
  s.session.username = bmc.username;
  s.session.password = password;
  s.session.suite = *suite;
  s.session.request_timeout = milliseconds(*timeout);
  s.session.max_request_timeout = milliseconds(*timeout) * 8;
  s.session.max_tries = *retries + 1;
  s.session.min_spacing = milliseconds(*spacing);
  s.session.idle_reopen = o.session_idle_reopen;
  s.power_timeout = milliseconds(*power);
  return s;
}

bool same_session_config(const ipmi::SessionConfig& a, const ipmi::SessionConfig& b) {
  return a.endpoint.host == b.endpoint.host && a.endpoint.port == b.endpoint.port &&
         a.username == b.username && a.password == b.password && a.suite.id == b.suite.id &&
         a.request_timeout == b.request_timeout && a.max_tries == b.max_tries &&
         a.min_spacing == b.min_spacing && a.idle_reopen == b.idle_reopen;
}

Error cc_error(const char* what, uint8_t cc) {
  return Error(Code::kDriverError, std::string(what) + " failed: " + ipmi::completion_code_text(cc));
}

// ---- Session cache -----------------------------------------------------------------------

// One BMC: its strand, its session, and a FIFO lock (StrandMutex) so one
// exchange runs at a time. Only touched on the strand.
struct BmcEntry {
  explicit BmcEntry(asio::any_io_executor ex) : strand(asio::make_strand(ex)) {}
  asio::strand<asio::any_io_executor> strand;
  std::unique_ptr<IpmiSession> session;
  StrandMutex mutex;  // one exchange with this BMC at a time
};

class SessionPool {
 public:
  SessionPool(asio::any_io_executor ex, IpmiDriverOptions opts, Logger log)
      : ex_(std::move(ex)), opts_(std::move(opts)), log_(std::move(log)) {}

  // Best-effort Close Session for every open session (synchronous datagrams).
  ~SessionPool() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, e] : entries_) {
      if (e->session) e->session->close_now();
    }
  }

  const IpmiDriverOptions& options() const { return opts_; }
  const Logger& log() const { return log_; }

  // Runs `op` with the BMC's session, serialised with every other call to
  // that BMC, on the BMC's strand. Resumes the caller on its own executor.
  template <typename T>
  asio::awaitable<Result<T>> run(const NodeSettings& s,
                                 std::function<asio::awaitable<Result<T>>(IpmiSession&)> op) {
    BmcEntry& e = entry_for(s.session);
    std::optional<Result<T>> out;
    co_await asio::co_spawn(
        e.strand,
        [&]() -> asio::awaitable<void> {
          co_await e.mutex.lock(e.strand);
          StrandMutex::Guard guard(e.mutex);
          if (e.session && !same_session_config(e.session->config(), s.session)) {
            // Password, suite or timing changed: start over with the new settings.
            co_await e.session->close(SteadyClock::now() + s.session.request_timeout);
            e.session.reset();
          }
          if (!e.session) {
            e.session = std::make_unique<IpmiSession>(e.strand, s.session, log_);
          }
          out.emplace(co_await op(*e.session));
        },
        asio::use_awaitable);
    co_return std::move(*out);
  }

 private:
  BmcEntry& entry_for(const ipmi::SessionConfig& c) {
    const std::string key = c.endpoint.host + ":" + std::to_string(c.endpoint.port) + "\n" + c.username;
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = entries_[key];
    if (!slot) slot = std::make_unique<BmcEntry>(ex_);
    return *slot;
  }

  asio::any_io_executor ex_;
  IpmiDriverOptions opts_;
  Logger log_;
  std::mutex mu_;  // guards entries_ (the map, not the entries)
  std::map<std::string, std::unique_ptr<BmcEntry>> entries_;
};

// One IPMI command with the per-call deadline; returns the response when the
// completion code is 0, else a kDriverError naming the command and the code.
// `what` is a std::string: GCC 12 cannot copy an array (a string literal)
// argument into a coroutine frame.
asio::awaitable<Result<IpmiResponse>> checked(IpmiSession& s, std::string what, uint8_t net_fn,
                                              uint8_t cmd, ipmi::Bytes data,
                                              SteadyClock::time_point deadline) {
  auto r = co_await s.command(net_fn, cmd, std::move(data), deadline);
  if (!r) co_return r.error();
  if (r->completion_code != 0) co_return cc_error(what.c_str(), r->completion_code);
  co_return r;
}

asio::awaitable<void> sleep_for(milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

// ---- Power ----------------------------------------------------------------------------------

class IpmiPower : public PowerInterface {
 public:
  explicit IpmiPower(std::shared_ptr<SessionPool> pool) : pool_(std::move(pool)) {}

  Status validate(const BmcInfo& bmc) const override {
    auto s = settings_for(bmc, std::string(), pool_->options());
    if (!s) return s.error();
    return ok_status();
  }

  asio::awaitable<Result<PowerState>> get_power_state(const DriverTarget& t) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.error();
    const auto deadline = SteadyClock::now() + pool_->options().command_deadline;
    co_return co_await read_power(*s, deadline);
  }

  asio::awaitable<Status> set_power_state(const DriverTarget& t, PowerAction action) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.error();
    const auto deadline = SteadyClock::now() + s->power_timeout;
    const Logger log = pool_->log().with("node", t.node_id);

    auto current = co_await read_power(*s, deadline);
    if (!current) co_return current.error();

    std::optional<ipmi::ChassisControl> control;
    PowerState want = power_action_result(action);
    switch (action) {
      case PowerAction::kOn:
        if (*current != PowerState::kOn) control = ipmi::ChassisControl::kPowerUp;
        break;
      case PowerAction::kOff:
        if (*current != PowerState::kOff) control = ipmi::ChassisControl::kPowerDown;
        break;
      case PowerAction::kSoftOff:
        if (*current != PowerState::kOff) control = ipmi::ChassisControl::kSoftShutdown;
        break;
      case PowerAction::kReboot:
        control = *current == PowerState::kOn ? ipmi::ChassisControl::kPowerCycle
                                              : ipmi::ChassisControl::kPowerUp;
        break;
    }
    if (control) {
      const uint8_t c = static_cast<uint8_t>(*control);
      auto r = co_await pool_->run<IpmiResponse>(*s, [&](IpmiSession& session) {
        return checked(session, std::string("Chassis Control"), ipmi::kNetFnChassis, ipmi::kCmdChassisControl,
                       ipmi::Bytes{c}, command_deadline(deadline));
      });
      if (!r) {
        log.warn("ipmi power action failed",
                 {{"action", std::string(to_string(action))}, {"error", r.error().message}});
        co_return r.error();
      }
    }

    // Poll until the state is observed. A failed poll is not fatal while
    // time remains: a BMC may be busy right after a power transition.
    PowerState last = *current;
    if (!control && last == want) co_return ok_status();
    std::string last_error;
    for (;;) {
      auto p = co_await read_power(*s, deadline);
      if (p) {
        last = *p;
        if (last == want) {
          log.info("ipmi power state reached", {{"action", std::string(to_string(action))},
                                                {"state", std::string(to_string(last))}});
          co_return ok_status();
        }
      } else {
        last_error = p.error().message;
      }
      if (SteadyClock::now() + pool_->options().poll_interval >= deadline) break;
      co_await sleep_for(pool_->options().poll_interval);
    }
    std::string msg = "power state did not reach " + std::string(to_string(want)) + " within " +
                      std::to_string(s->power_timeout.count() / 1000) + " s (last observed: " +
                      std::string(to_string(last)) + ")";
    if (!last_error.empty()) msg += "; last error: " + last_error;
    log.warn("ipmi power action timed out", {{"action", std::string(to_string(action))}});
    co_return Error(Code::kTimeout, msg);
  }

 private:
  SteadyClock::time_point command_deadline(SteadyClock::time_point overall) const {
    return std::min(overall, SteadyClock::now() + pool_->options().command_deadline);
  }

  asio::awaitable<Result<PowerState>> read_power(const NodeSettings& s,
                                                 SteadyClock::time_point overall) {
    const auto deadline = command_deadline(overall);
    auto r = co_await pool_->run<IpmiResponse>(s, [&](IpmiSession& session) {
      return checked(session, std::string("Get Chassis Status"), ipmi::kNetFnChassis,
                     ipmi::kCmdGetChassisStatus, {}, deadline);
    });
    if (!r) co_return r.error();
    auto st = ipmi::parse_chassis_status(r->data);
    if (!st) co_return st.error();
    co_return st->power_on ? PowerState::kOn : PowerState::kOff;
  }

  std::shared_ptr<SessionPool> pool_;
};

// ---- Management ----------------------------------------------------------------------------

class IpmiManagement : public ManagementInterface {
 public:
  explicit IpmiManagement(std::shared_ptr<SessionPool> pool) : pool_(std::move(pool)) {}

  Status validate(const BmcInfo& bmc) const override {
    auto s = settings_for(bmc, std::string(), pool_->options());
    if (!s) return s.error();
    return ok_status();
  }

  asio::awaitable<Status> verify(const DriverTarget& t) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.error();
    const auto deadline = SteadyClock::now() + pool_->options().command_deadline;
    auto r = co_await pool_->run<IpmiResponse>(*s, [&](IpmiSession& session) {
      return checked(session, std::string("Get Device ID"), ipmi::kNetFnApp, ipmi::kCmdGetDeviceId, {}, deadline);
    });
    if (!r) co_return r.error();
    auto id = ipmi::parse_device_id(r->data);
    if (!id) co_return id.error();
    pool_->log().info("ipmi bmc verified",
                      {{"node", t.node_id},
                       {"manufacturer", std::to_string(id->manufacturer_id)},
                       {"product", std::to_string(id->product_id)},
                       {"firmware", std::to_string(id->firmware_major) + "." +
                                        std::to_string(id->firmware_minor)}});
    co_return ok_status();
  }

  asio::awaitable<Status> set_boot_device(const DriverTarget& t, BootDevice device,
                                          bool persistent) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.error();
    const auto deadline = SteadyClock::now() + pool_->options().command_deadline;
    const uint8_t selector = device == BootDevice::kPxe ? ipmi::kBootDevicePxe : ipmi::kBootDeviceDisk;
    const bool efi = t.boot_mode == "uefi";
    const bool disable_timeout = pool_->options().disable_boot_flag_timeout;
    const Logger log = pool_->log().with("node", t.node_id);

    // One locked run: the set-in-progress bracket must not interleave with
    // another caller's boot option writes.
    auto r = co_await pool_->run<ipmi::BootFlags>(
        *s, [&](IpmiSession& session) -> asio::awaitable<Result<ipmi::BootFlags>> {
          co_return co_await write_boot_flags(session, selector, persistent, efi, disable_timeout,
                                              deadline, log);
        });
    if (!r) co_return r.error();
    if (r->device_selector != selector) {
      co_return Error(Code::kDriverError,
                      "BMC reports boot device selector " + std::to_string(r->device_selector) +
                          " after setting " + std::to_string(selector));
    }
    log.info("ipmi boot device set", {{"device", device == BootDevice::kPxe ? "pxe" : "disk"},
                                      {"persistent", persistent ? "true" : "false"},
                                      {"efi", efi ? "true" : "false"}});
    co_return ok_status();
  }

 private:
  // The sequence `ipmitool chassis bootdev <dev> options=...` uses, plus
  // Ironic's boot-flag timeout switch, then a read-back of parameter 5.
  // Bracket steps (set-in-progress, ack clearing, commit) are optional in the
  // spec; their completion codes are logged, not fatal.
  static asio::awaitable<Result<ipmi::BootFlags>> write_boot_flags(
      IpmiSession& session, uint8_t selector, bool persistent, bool efi, bool disable_timeout,
      SteadyClock::time_point deadline, const Logger& log) {
    using namespace ipmi;
    auto optional_step = [&](uint8_t param, Bytes data) -> asio::awaitable<Status> {
      auto r = co_await session.command(kNetFnChassis, kCmdSetBootOptions,
                                        set_boot_option_request(param, data), deadline);
      if (!r) co_return r.error();
      if (r->completion_code != 0) {
        log.debug("ipmi optional boot option step refused",
                  {{"param", std::to_string(param)},
                   {"cc", completion_code_text(r->completion_code)}});
      }
      co_return ok_status();
    };
    // Parameter data as named vectors: GCC 12 rejects initializer_list
    // temporaries inside a co_await expression.
    const Bytes no_auto_clear{0x08};  // param 3 bit 3: keep the valid bit past 60 s
    const Bytes set_in_progress{0x01};
    const Bytes commit_write{0x02};
    const Bytes set_complete{0x00};
    const Bytes clear_bios_ack{0x01, 0x01};  // param 4: write mask, then data
    if (disable_timeout) {
      if (auto st = co_await optional_step(kBootParamFlagValidClearing, no_auto_clear); !st) {
        co_return st.error();
      }
    }
    if (auto st = co_await optional_step(kBootParamSetInProgress, set_in_progress); !st) {
      co_return st.error();
    }
    if (auto st = co_await optional_step(kBootParamInfoAck, clear_bios_ack); !st) co_return st.error();

    const Bytes flags =
        set_boot_option_request(kBootParamBootFlags, boot_flags_data(selector, persistent, efi));
    auto set = co_await session.command(kNetFnChassis, kCmdSetBootOptions, flags, deadline);
    if (!set) co_return set.error();
    if (set->completion_code != 0) {
      (void)co_await optional_step(kBootParamSetInProgress, set_complete);
      co_return cc_error("Set System Boot Options (boot flags)", set->completion_code);
    }
    if (auto st = co_await optional_step(kBootParamSetInProgress, commit_write); !st) {
      co_return st.error();
    }
    if (auto st = co_await optional_step(kBootParamSetInProgress, set_complete); !st) {
      co_return st.error();
    }

    auto get = co_await checked(session, std::string("Get System Boot Options (boot flags)"), kNetFnChassis,
                                kCmdGetBootOptions, get_boot_option_request(kBootParamBootFlags),
                                deadline);
    if (!get) co_return get.error();
    co_return parse_boot_flags(get->data);
  }

  std::shared_ptr<SessionPool> pool_;
};

}  // namespace

std::unique_ptr<Driver> make_ipmi_driver(boost::asio::any_io_executor ex, IpmiDriverOptions opts,
                                         Logger log) {
  // Power and management share the session cache; it dies with the last of them.
  auto pool = std::make_shared<SessionPool>(std::move(ex), std::move(opts),
                                            log.with("driver", "ipmi"));
  auto d = std::make_unique<Driver>();
  d->name = "ipmi";
  d->power = std::make_unique<IpmiPower>(pool);
  d->management = std::make_unique<IpmiManagement>(pool);
  return d;
}

}  // namespace kiln
