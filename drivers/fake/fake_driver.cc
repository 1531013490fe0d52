#include "drivers/fake/fake_driver.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace kiln {
namespace {

const std::set<std::string> kSteps = {"verify", "power", "boot_device", "inspect",
                                      "clean",  "deploy", "undeploy",   "validate"};

// Options parsed from bmc.options; validate() and every call use the same parser.
struct FakeOptions {
  int power_delay_ms = 0;
  int step_delay_ms = 0;
  std::string hold_until_file;
  std::set<std::string> fail;
  std::string validation = "pass";
  // validation_script: the report of each validate call in turn (the last
  // one repeats); empty = `validation`.
  nlohmann::json validation_script = nlohmann::json::array();
};

const std::set<std::string> kScriptedReports = {"pass", "fail", "numeric_miss", "xid", "missing_gpu"};

Result<FakeOptions> parse_options(const nlohmann::json& o) {
  FakeOptions out;
  if (o.is_null()) return out;
  if (!o.is_object()) return Error::invalid("/bmc/options", "must be an object");
  for (const auto& [key, v] : o.items()) {
    std::string field = "/bmc/options/" + key;
    if (key == "power_delay_ms" || key == "step_delay_ms") {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 3'600'000)
        return Error::invalid(field, "must be an integer from 0 to 3600000");
      (key == "power_delay_ms" ? out.power_delay_ms : out.step_delay_ms) = v.get<int>();
    } else if (key == "hold_until_file") {
      if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>()[0] != '/')
        return Error::invalid(field, "must be an absolute path");
      out.hold_until_file = v.get<std::string>();
    } else if (key == "fail") {
      if (!v.is_array()) return Error::invalid(field, "must be an array of step names");
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string() || !kSteps.count(v[i].get<std::string>()))
          return Error::invalid(field + "/" + std::to_string(i),
                                "must be one of verify, power, boot_device, inspect, clean, deploy, "
                                "undeploy, validate");
        out.fail.insert(v[i].get<std::string>());
      }
    } else if (key == "validation_script") {
      if (!v.is_array() || v.empty()) return Error::invalid(field, "must be a non-empty array of reports");
      for (size_t i = 0; i < v.size(); ++i) {
        bool named = v[i].is_string() && kScriptedReports.count(v[i].get<std::string>());
        bool report = v[i].is_object() && v[i].contains("checks") && v[i]["checks"].is_array();
        if (!named && !report)
          return Error::invalid(field + "/" + std::to_string(i),
                                "must be pass, fail, numeric_miss, xid, missing_gpu or a report object with checks");
      }
      out.validation_script = v;
    } else if (key == "validation") {
      if (!v.is_string() || (v != "pass" && v != "fail"))
        return Error::invalid(field, "must be \"pass\" or \"fail\"");
      out.validation = v.get<std::string>();
    } else {
      return Error::invalid(field, "unknown option for the fake driver");
    }
  }
  return out;
}

// Shared by the interfaces of one driver instance.
class FakeLab {
 public:
  explicit FakeLab(asio::any_io_executor ex) : ex_(std::move(ex)) {}

  asio::awaitable<void> sleep_ms(int ms) {
    if (ms <= 0) co_return;
    asio::steady_timer t(ex_, std::chrono::milliseconds(ms));
    boost::system::error_code ec;
    co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }

  // What a slow step takes: its delay, then the hold file's appearance.
  asio::awaitable<void> step_pause(const FakeOptions& o) {
    co_await sleep_ms(o.step_delay_ms);
    std::error_code ec;
    while (!o.hold_until_file.empty() && !std::filesystem::exists(o.hold_until_file, ec)) co_await sleep_ms(50);
  }

  // Parses options and applies the injected failure for `step`.
  Result<FakeOptions> options_for(const DriverTarget& t, const char* step) {
    auto o = parse_options(t.bmc.options);
    if (!o) return o;
    if (o->fail.count(step))
      return Error(Code::kDriverError, std::string("fake driver: injected failure in ") + step);
    return o;
  }

  PowerState power(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = power_.find(id);
    return it == power_.end() ? PowerState::kOff : it->second;
  }
  void set_power(const std::string& id, PowerState s) {
    std::lock_guard<std::mutex> l(mu_);
    power_[id] = s;
  }
  // How many validate calls the node had before this one.
  int next_validation(const std::string& id) {
    std::lock_guard<std::mutex> l(mu_);
    return validations_[id]++;
  }
  void set_boot(const std::string& id, BootDevice d) {
    std::lock_guard<std::mutex> l(mu_);
    boot_[id] = d;
  }

 private:
  asio::any_io_executor ex_;
  std::mutex mu_;
  std::map<std::string, PowerState> power_;
  std::map<std::string, BootDevice> boot_;
  std::map<std::string, int> validations_;
};

// JSON is built in plain functions, not in coroutine bodies: GCC 12 mishandles
// initializer-list temporaries inside coroutines.
nlohmann::json fake_inventory(const DriverTarget& t) {
  nlohmann::json nics = nlohmann::json::array();
  for (const auto& mac : t.macs) nics.push_back({{"mac", mac}, {"driver", "fake"}, {"speed_mbps", 100000}});
  return nlohmann::json{
      {"source", "fake"},
      {"system", {{"manufacturer", "Kiln"}, {"product", "Fake GPU server"}, {"serial", t.node_id.substr(0, 8)}}},
      {"cpus", {{"count", 2}, {"cores", 64}, {"model", "Fake CPU"}}},
      {"memory_mib", 1048576},
      {"disks", {{{"name", "nvme0n1"}, {"size_bytes", 3840755982336LL}, {"rotational", false}}}},
      {"nics", nics},
      {"gpus", nlohmann::json::array()},
  };
}

nlohmann::json fake_report(ValidationPlan plan, bool pass) {
  nlohmann::json check = {{"name", "fake_check"},
                          {"status", pass ? "pass" : "fail"},
                          {"value", nullptr},
                          {"unit", ""},
                          {"threshold", nullptr},
                          {"details", pass ? "fake driver: configured to pass" : "fake driver: configured to fail"}};
  return nlohmann::json{{"plan", std::string(to_string(plan))}, {"result", pass ? "pass" : "fail"}, {"checks", nlohmann::json::array({check})}};
}

// A scripted report by name (bmc.options.validation_script), shaped as
// kiln-agent's (agent/validate/checks/plan.h) so the gate sees real check
// names: numeric_miss is an NCCL bus bandwidth under its floor (retried
// once), xid and missing_gpu are hard failures.
nlohmann::json check_json(const char* name, const char* status, nlohmann::json value, const char* unit,
                          nlohmann::json threshold, const std::string& reason) {
  return {{"name", name},       {"status", status},       {"value", std::move(value)},
          {"unit", unit},       {"threshold", std::move(threshold)},
          {"details", reason.empty() ? nlohmann::json::object() : nlohmann::json{{"reason", reason}}}};
}

nlohmann::json scripted_report(ValidationPlan plan, const nlohmann::json& entry) {
  if (entry.is_object()) {
    nlohmann::json r = entry;
    if (!r.contains("plan")) r["plan"] = std::string(to_string(plan));
    if (!r.contains("result")) {
      bool failed = false;
      for (const auto& c : r["checks"]) failed |= c.is_object() && c.value("status", "") == "fail";
      r["result"] = failed ? "fail" : "pass";
    }
    return r;
  }
  const std::string name = entry.get<std::string>();
  if (name == "pass" || name == "fail") return fake_report(plan, name == "pass");
  nlohmann::json checks = nlohmann::json::array();
  checks.push_back(check_json("gpu_inventory", name == "missing_gpu" ? "fail" : "pass", name == "missing_gpu" ? 7 : 8,
                              "GPUs", {{"expected", 8}},
                              name == "missing_gpu" ? "expected 8 GPUs, found 7: 0000:9b:00.0 fell off the bus" : ""));
  checks.push_back(check_json("gpu_health", name == "xid" ? "fail" : "pass", name == "xid" ? 1 : 0, "problems",
                              {{"max", 0}}, name == "xid" ? "GPU 3: XID 79 (GPU has fallen off the bus)" : ""));
  checks.push_back(check_json("nccl_allreduce", name == "numeric_miss" ? "fail" : "pass",
                              name == "numeric_miss" ? 350.0 : 455.0, "GB/s", {{"min", 400}}, ""));
  checks.push_back(check_json("hbm_bandwidth", "pass", 3010.0, "GB/s", {{"min", 2848}}, ""));
  return {{"plan", std::string(to_string(plan))}, {"result", "fail"}, {"checks", std::move(checks)}};
}

Status validate_common(const BmcInfo& bmc) {
  if (bmc.address.empty()) return Error::invalid("/bmc/address", "is required");
  auto o = parse_options(bmc.options);
  if (!o) return o.take_error();
  return ok_status();
}

class FakePower : public PowerInterface {
 public:
  explicit FakePower(std::shared_ptr<FakeLab> lab) : lab_(std::move(lab)) {}
  Status validate(const BmcInfo& bmc) const override { return validate_common(bmc); }

  asio::awaitable<Result<PowerState>> get_power_state(const DriverTarget& t) override {
    auto o = parse_options(t.bmc.options);
    if (!o) co_return o.take_error();
    if (o->fail.count("power"))
      co_return Error(Code::kDriverError, "fake driver: injected failure in power");
    co_return lab_->power(t.node_id);
  }

  asio::awaitable<Status> set_power_state(const DriverTarget& t, PowerAction action) override {
    auto o = lab_->options_for(t, "power");
    if (!o) co_return o.take_error();
    co_await lab_->sleep_ms(o->power_delay_ms);
    lab_->set_power(t.node_id, power_action_result(action));
    co_return ok_status();
  }

 private:
  std::shared_ptr<FakeLab> lab_;
};

class FakeManagement : public ManagementInterface {
 public:
  explicit FakeManagement(std::shared_ptr<FakeLab> lab) : lab_(std::move(lab)) {}
  Status validate(const BmcInfo& bmc) const override { return validate_common(bmc); }

  asio::awaitable<Status> verify(const DriverTarget& t) override {
    auto o = lab_->options_for(t, "verify");
    if (!o) co_return o.take_error();
    co_await lab_->step_pause(*o);
    co_return ok_status();
  }

  asio::awaitable<Status> set_boot_device(const DriverTarget& t, BootDevice device, bool) override {
    auto o = lab_->options_for(t, "boot_device");
    if (!o) co_return o.take_error();
    lab_->set_boot(t.node_id, device);
    co_return ok_status();
  }

 private:
  std::shared_ptr<FakeLab> lab_;
};

class FakeInspect : public InspectInterface {
 public:
  explicit FakeInspect(std::shared_ptr<FakeLab> lab) : lab_(std::move(lab)) {}
  asio::awaitable<Result<nlohmann::json>> inspect(const DriverTarget& t) override {
    auto o = lab_->options_for(t, "inspect");
    if (!o) co_return o.take_error();
    co_await lab_->step_pause(*o);
    co_return fake_inventory(t);
  }

 private:
  std::shared_ptr<FakeLab> lab_;
};

class FakeDeploy : public DeployInterface {
 public:
  explicit FakeDeploy(std::shared_ptr<FakeLab> lab) : lab_(std::move(lab)) {}
  asio::awaitable<Status> deploy(const DriverTarget& t, const DeployRequest&) override {
    auto o = lab_->options_for(t, "deploy");
    if (!o) co_return o.take_error();
    co_await lab_->step_pause(*o);
    co_return ok_status();
  }
  asio::awaitable<Status> undeploy(const DriverTarget& t) override {
    auto o = lab_->options_for(t, "undeploy");
    if (!o) co_return o.take_error();
    co_await lab_->step_pause(*o);
    co_return ok_status();
  }

 private:
  std::shared_ptr<FakeLab> lab_;
};

class FakeClean : public CleanInterface {
 public:
  explicit FakeClean(std::shared_ptr<FakeLab> lab) : lab_(std::move(lab)) {}
  asio::awaitable<Status> clean(const DriverTarget& t) override {
    auto o = lab_->options_for(t, "clean");
    if (!o) co_return o.take_error();
    co_await lab_->step_pause(*o);
    co_return ok_status();
  }

 private:
  std::shared_ptr<FakeLab> lab_;
};

class FakeValidate : public ValidateInterface {
 public:
  explicit FakeValidate(std::shared_ptr<FakeLab> lab) : lab_(std::move(lab)) {}
  asio::awaitable<Result<nlohmann::json>> validate(const DriverTarget& t, ValidationPlan plan) override {
    auto o = lab_->options_for(t, "validate");
    if (!o) co_return o.take_error();
    co_await lab_->step_pause(*o);
    int n = lab_->next_validation(t.node_id);
    nlohmann::json report;
    if (o->validation_script.empty()) {
      report = fake_report(plan, o->validation == "pass");
    } else {
      std::size_t i = std::min<std::size_t>(static_cast<std::size_t>(n), o->validation_script.size() - 1);
      report = scripted_report(plan, o->validation_script[i]);
    }
    if (t.profile.is_object()) report["profile"] = t.profile.value("name", "");
    co_return report;
  }

 private:
  std::shared_ptr<FakeLab> lab_;
};

}  // namespace

std::unique_ptr<Driver> make_fake_driver(asio::any_io_executor ex) {
  auto lab = std::make_shared<FakeLab>(std::move(ex));
  auto d = std::make_unique<Driver>();
  d->name = "fake";
  d->power = std::make_unique<FakePower>(lab);
  d->management = std::make_unique<FakeManagement>(lab);
  d->inspect = std::make_unique<FakeInspect>(lab);
  d->deploy = std::make_unique<FakeDeploy>(lab);
  d->clean = std::make_unique<FakeClean>(lab);
  d->validate = std::make_unique<FakeValidate>(lab);
  return d;
}

}  // namespace kiln
