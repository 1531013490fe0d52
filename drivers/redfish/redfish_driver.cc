#include "drivers/redfish/redfish_driver.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <unordered_map>
#include <mutex>
#include <optional>
#include <string_view>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/fd_limit.h"
#include "common/strand_mutex.h"
#include "drivers/redfish/body_parser.h"
#include "drivers/redfish/boot.h"
#include "drivers/redfish/client.h"
#include "drivers/redfish/discovery.h"
#include "drivers/redfish/inventory.h"
#include "drivers/redfish/power.h"

namespace kiln {

namespace {

using redfish::Clock;
using redfish::RedfishClient;
using std::chrono::milliseconds;

// What one call needs, from the node's BMC fields and options.
struct NodeSettings {
  redfish::ClientSettings client;
  std::string system_id;
  milliseconds power_timeout{0};
  milliseconds poll_interval{0};
  std::string pxe_target = "Pxe";
};

Result<int64_t> int_option(const nlohmann::json& o, const char* key, int64_t lo, int64_t hi,
                           int64_t fallback) {
  auto it = o.find(key);
  if (it == o.end()) return fallback;
  const std::string field = std::string("/bmc/options/") + key;
  if (!it->is_number_integer()) return Error::invalid(field, "must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return Error::invalid(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  return v;
}

// Url::parse's message is `url "TEXT": why`; TEXT has no spaces (refused), so
// the last `": ` separates it from the reason, which is all we repeat.
std::string url_problem(const std::string& message) {
  std::size_t sep = message.rfind("\": ");
  return sep == std::string::npos ? "unparsable" : message.substr(sep + 3);
}

Result<NodeSettings> settings_for(const BmcInfo& bmc, const std::string& password,
                                  const RedfishDriverOptions& d) {
  NodeSettings s;
  if (bmc.address.empty()) return Error::invalid("/bmc/address", "required for redfish");
  if (bmc.username.empty()) return Error::invalid("/bmc/username", "required for redfish");
  // The address is never quoted in these errors: they reach logs and API
  // replies, and an address with a userinfo holds a password.
  std::string address = bmc.address;
  if (address.find("://") == std::string::npos) address = "https://" + address;
  if (http::url_has_userinfo(address))
    return Error::invalid("/bmc/address",
                          "must not hold credentials (user:password@): give them in username and password");
  auto url = http::Url::parse(address);
  if (!url) return Error::invalid("/bmc/address", "not a URL or host[:port]: " + url_problem(url.error().message));
  if (url->scheme != "https" && url->scheme != "http") {
    return Error::invalid("/bmc/address", "scheme must be https (or http)");
  }
  s.client.origin = url->origin();
  s.client.username = bmc.username;
  s.client.password = password;
  s.client.verify_tls = bmc.verify_tls;
  s.system_id = bmc.system_id;

  const nlohmann::json& o = bmc.options;
  if (!o.is_null() && !o.is_object()) return Error::invalid("/bmc/options", "must be an object");
  const nlohmann::json opts = o.is_object() ? o : nlohmann::json::object();
  if (opts.contains("ca_file")) {
    if (!opts["ca_file"].is_string()) return Error::invalid("/bmc/options/ca_file", "must be a string");
    s.client.ca_file = opts["ca_file"].get<std::string>();
  }
  auto rt = int_option(opts, "request_timeout_s", 1, 600,
                       std::chrono::duration_cast<std::chrono::seconds>(d.request_timeout).count());
  if (!rt) return rt.take_error();
  s.client.request_timeout = opts.contains("request_timeout_s") ? milliseconds(*rt * 1000) : d.request_timeout;
  auto pt = int_option(opts, "power_timeout_s", 1, 3600, 0);
  if (!pt) return pt.take_error();
  s.power_timeout = opts.contains("power_timeout_s") ? milliseconds(*pt * 1000) : d.power_timeout;
  auto pi = int_option(opts, "poll_interval_ms", 50, 60000, d.poll_interval.count());
  if (!pi) return pi.take_error();
  s.poll_interval = milliseconds(*pi);
  if (opts.contains("pxe_target")) {
    const auto& v = opts["pxe_target"];
    if (!v.is_string() || (v != "Pxe" && v != "UefiHttp")) {
      return Error::invalid("/bmc/options/pxe_target", "must be \"Pxe\" or \"UefiHttp\"");
    }
    s.pxe_target = v.get<std::string>();
  }
  return s;
}

// One BMC: its strand, its client, and a FIFO lock (StrandMutex) so one call
// runs at a time. Only touched on the strand.
struct BmcEntry {
  explicit BmcEntry(asio::any_io_executor ex) : strand(asio::make_strand(ex)) {}
  asio::strand<asio::any_io_executor> strand;
  std::unique_ptr<RedfishClient> client;
  StrandMutex mutex;  // one exchange with this BMC at a time
};

http::ClientOptions connection_options(const RedfishDriverOptions& o) {
  http::ClientOptions c;
  c.max_idle_per_origin = 1;  // one call at a time per BMC: it can only use one
  c.max_idle_total = o.max_idle_connections;
  c.idle_timeout = o.idle_timeout;
  c.max_tls_sessions = o.max_tls_sessions;
  c.max_body = o.max_response_bytes;
  return c;
}

class BmcPool {
 public:
  BmcPool(asio::any_io_executor ex, RedfishDriverOptions opts, Logger log)
      : ex_(std::move(ex)),
        opts_(opts),
        log_(std::move(log)),
        http_(ex_, connection_options(opts_)),
        parser_(opts_.parse_inline_limit) {}

  // Logs out of every open session, bounded by logout_timeout, on a private
  // io_context (the driver's may already be stopped).
  ~BmcPool() {
    std::vector<std::pair<RedfishClient::SessionInfo, redfish::ClientSettings>> open;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& kv : entries_) {
        if (!kv.second->client) continue;
        auto s = kv.second->client->session();
        if (s) open.emplace_back(*s, kv.second->client->settings());
      }
    }
    if (open.empty()) return;
    asio::io_context io;
    {
      http::HttpClient http(io.get_executor());
      for (const auto& o : open) {
        http::ClientRequest req;
        req.method = http::bhttp::verb::delete_;
        req.url = o.first.url;
        req.headers["X-Auth-Token"] = o.first.token;
        req.timeout = opts_.logout_timeout;
        req.verify_tls = o.second.verify_tls;
        req.ca_file = o.second.ca_file;
        asio::co_spawn(io, logout_one(http, std::move(req), log_), asio::detached);
      }
      io.run_for(opts_.logout_timeout + milliseconds(500));
      http.close();
    }
    io.stop();
  }

  const RedfishDriverOptions& options() const { return opts_; }
  const Logger& log() const { return log_; }
  RedfishDriverStats stats() const { return {http_.stats(), parser_.parsed_off_thread()}; }

  // Runs `op` with the BMC's client, serialised with every other call to that
  // BMC, on the BMC's strand. Resumes the caller on its own executor.
  template <typename R>
  asio::awaitable<R> run(const NodeSettings& s, std::function<asio::awaitable<R>(RedfishClient&)> op) {
    BmcEntry& e = entry_for(s.client);
    std::optional<R> out;
    co_await asio::co_spawn(
        e.strand,
        [&]() -> asio::awaitable<void> {
          co_await e.mutex.lock(e.strand);
          StrandMutex::Guard guard(e.mutex);
          if (!e.client) {
            e.client = std::make_unique<RedfishClient>(http_, parser_, s.client, log_);
          } else {
            e.client->update(s.client);
          }
          out.emplace(co_await op(*e.client));
        },
        asio::use_awaitable);
    co_return std::move(*out);
  }

 private:
  static asio::awaitable<void> logout_one(http::HttpClient& http, http::ClientRequest req, Logger log) {
    const std::string url = req.url;
    auto r = co_await http.request(std::move(req));
    if (!r) log.warn("redfish: logout at shutdown failed", {{"session", url}, {"error", r.error().message}});
  }

  BmcEntry& entry_for(const redfish::ClientSettings& c) {
    const std::string key = c.origin + "\n" + c.username;
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = entries_[key];
    if (!slot) slot = std::make_unique<BmcEntry>(ex_);
    return *slot;
  }

  asio::any_io_executor ex_;
  RedfishDriverOptions opts_;
  Logger log_;
  http::HttpClient http_;  // every BMC's connections; outlives the clients below
  redfish::BodyParser parser_;  // every BMC's large bodies; outlives the clients below
  std::mutex mu_;  // guards entries_ (the map, not the entries)
  std::unordered_map<std::string, std::unique_ptr<BmcEntry>> entries_;  // one per BMC: a sweep looks up thousands
};

redfish::PowerSettings power_settings(const NodeSettings& s, const RedfishDriverOptions& o) {
  redfish::PowerSettings p;
  p.system_id = s.system_id;
  p.request_deadline = o.command_deadline;
  p.power_timeout = s.power_timeout;
  p.poll_interval = s.poll_interval;
  return p;
}

class RedfishPower : public PowerInterface {
 public:
  explicit RedfishPower(std::shared_ptr<BmcPool> pool) : pool_(std::move(pool)) {}

  Status validate(const BmcInfo& bmc) const override {
    auto s = settings_for(bmc, std::string(), pool_->options());
    if (!s) return s.error();
    return ok_status();
  }

  RedfishDriverStats stats() const { return pool_->stats(); }

  asio::awaitable<Result<PowerState>> get_power_state(const DriverTarget& t) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.take_error();
    const redfish::PowerSettings ps = power_settings(*s, pool_->options());
    std::function<asio::awaitable<Result<PowerState>>(RedfishClient&)> op =
        [ps](RedfishClient& c) -> asio::awaitable<Result<PowerState>> {
      co_return co_await redfish::read_power_state(c, ps);
    };
    co_return co_await pool_->run(*s, op);
  }

  asio::awaitable<Status> set_power_state(const DriverTarget& t, PowerAction action) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.take_error();
    const redfish::PowerSettings ps = power_settings(*s, pool_->options());
    const Logger log = pool_->log().with("node", t.node_id);
    std::function<asio::awaitable<Status>(RedfishClient&)> op =
        [ps, action, log](RedfishClient& c) -> asio::awaitable<Status> {
      co_return co_await redfish::change_power_state(c, ps, action, log);
    };
    Status r = co_await pool_->run(*s, op);
    if (r) {
      log.info("redfish: power state set", {{"action", std::string(to_string(action))}});
    } else {
      log.warn("redfish: power change failed",
               {{"action", std::string(to_string(action))}, {"error", r.error().message}});
    }
    co_return r;
  }

 private:
  std::shared_ptr<BmcPool> pool_;
};

class RedfishManagement : public ManagementInterface {
 public:
  explicit RedfishManagement(std::shared_ptr<BmcPool> pool) : pool_(std::move(pool)) {}

  Status validate(const BmcInfo& bmc) const override {
    auto s = settings_for(bmc, std::string(), pool_->options());
    if (!s) return s.error();
    return ok_status();
  }

  asio::awaitable<Status> verify(const DriverTarget& t) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.take_error();
    const std::string system_id = s->system_id;
    const milliseconds budget = pool_->options().command_deadline;
    std::function<asio::awaitable<Status>(RedfishClient&)> op =
        [system_id, budget](RedfishClient& c) -> asio::awaitable<Status> {
      const redfish::Deadline deadline = Clock::now() + budget;
      auto sys = co_await redfish::find_host_system(c, system_id, deadline);
      if (!sys) co_return sys.take_error();
      co_return ok_status();
    };
    co_return co_await pool_->run(*s, op);
  }

  asio::awaitable<Status> set_boot_device(const DriverTarget& t, BootDevice device,
                                          bool persistent) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.take_error();
    const std::string system_id = s->system_id;
    const std::string boot_mode = t.boot_mode;
    const std::string pxe_target = s->pxe_target;
    const milliseconds budget = pool_->options().command_deadline;
    std::function<asio::awaitable<Status>(RedfishClient&)> op =
        [system_id, boot_mode, pxe_target, budget, device,
         persistent](RedfishClient& c) -> asio::awaitable<Status> {
      const redfish::Deadline deadline = Clock::now() + budget;
      auto sys = co_await redfish::find_host_system(c, system_id, deadline);
      if (!sys) co_return sys.take_error();
      auto req = redfish::make_boot_request(sys->resource, device, persistent, boot_mode, pxe_target);
      if (!req) co_return req.take_error();
      co_return co_await redfish::apply_boot_override(c, std::move(*sys), std::move(*req), deadline);
    };
    co_return co_await pool_->run(*s, op);
  }

 private:
  std::shared_ptr<BmcPool> pool_;
};

class RedfishInspect : public InspectInterface {
 public:
  explicit RedfishInspect(std::shared_ptr<BmcPool> pool) : pool_(std::move(pool)) {}

  asio::awaitable<Result<nlohmann::json>> inspect(const DriverTarget& t) override {
    auto s = settings_for(t.bmc, t.password, pool_->options());
    if (!s) co_return s.take_error();
    const std::string system_id = s->system_id;
    const milliseconds budget = pool_->options().inspect_deadline;
    std::function<asio::awaitable<Result<nlohmann::json>>(RedfishClient&)> op =
        [system_id, budget](RedfishClient& c) -> asio::awaitable<Result<nlohmann::json>> {
      const redfish::Deadline deadline = Clock::now() + budget;
      auto sys = co_await redfish::find_host_system(c, system_id, deadline);
      if (!sys) co_return sys.take_error();
      co_return co_await redfish::collect_inventory(c, std::move(*sys), deadline);
    };
    co_return co_await pool_->run(*s, op);
  }

 private:
  std::shared_ptr<BmcPool> pool_;
};

}  // namespace

RedfishDriverStats redfish_driver_stats(const Driver& driver) {
  const auto* power = dynamic_cast<const RedfishPower*>(driver.power.get());
  return power ? power->stats() : RedfishDriverStats{};
}

std::size_t default_max_idle_connections() {
  return std::clamp<std::size_t>(fd_limit() / 4, 64, 16384);
}

std::unique_ptr<Driver> make_redfish_driver(asio::any_io_executor ex, RedfishDriverOptions opts,
                                            Logger log) {
  auto pool = std::make_shared<BmcPool>(std::move(ex), opts, log.with("driver", "redfish"));
  auto d = std::make_unique<Driver>();
  d->name = "redfish";
  d->power = std::make_unique<RedfishPower>(pool);
  d->management = std::make_unique<RedfishManagement>(pool);
  d->inspect = std::make_unique<RedfishInspect>(pool);
  return d;
}

}  // namespace kiln
