#include "drivers/redfish/power.h"

#include <algorithm>
#include <map>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "drivers/redfish/discovery.h"
#include "drivers/redfish/errors.h"

namespace kiln::redfish {

namespace {

using http::bhttp::verb;

const std::vector<std::string>& standard_reset_types() {
  static const std::vector<std::string> all = {"On",           "ForceOff",        "GracefulShutdown",
                                               "ForceRestart", "GracefulRestart", "PowerCycle",
                                               "ForceOn",      "Nmi",             "PushPowerButton"};
  return all;
}

std::vector<std::string> string_array(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (!j.is_array()) return out;
  for (const auto& v : j)
    if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

std::string power_state_string(const nlohmann::json& system) {
  auto it = system.find("PowerState");
  return it != system.end() && it->is_string() ? it->get<std::string>() : std::string("(none)");
}

nlohmann::json reset_body(const std::string& reset_type) {
  return nlohmann::json{{"ResetType", reset_type}};
}

const char* verb_text(PowerAction a) {
  switch (a) {
    case PowerAction::kOn: return "power on";
    case PowerAction::kOff: return "power off";
    case PowerAction::kSoftOff: return "soft power off";
    case PowerAction::kReboot: return "reboot";
  }
  return "power";
}

asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  boost::system::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

}  // namespace

std::optional<PowerState> parse_redfish_power_state(std::string_view s) {
  if (s == "On" || s == "PoweringOn" || s == "Paused") return PowerState::kOn;
  if (s == "Off" || s == "PoweringOff") return PowerState::kOff;
  return std::nullopt;
}

std::vector<std::string> allowed_reset_types(const nlohmann::json& reset_action,
                                             const nlohmann::json& action_info) {
  if (reset_action.is_object()) {
    auto it = reset_action.find("ResetType@Redfish.AllowableValues");
    if (it != reset_action.end()) {
      auto v = string_array(*it);
      if (!v.empty()) return v;
    }
  }
  if (action_info.is_object()) {
    auto params = action_info.find("Parameters");
    if (params != action_info.end() && params->is_array()) {
      for (const auto& p : *params) {
        if (p.is_object() && p.value("Name", std::string()) == "ResetType") {
          auto av = p.find("AllowableValues");
          if (av != p.end()) return string_array(*av);
        }
      }
    }
  }
  return {};
}

Result<std::string> choose_reset_type(PowerAction action, PowerState current,
                                      const std::vector<std::string>& allowed) {
  std::vector<std::string> prefs;
  switch (action) {
    case PowerAction::kOn: prefs = {"On", "ForceOn"}; break;
    case PowerAction::kOff: prefs = {"ForceOff"}; break;
    case PowerAction::kSoftOff: prefs = {"GracefulShutdown"}; break;
    case PowerAction::kReboot:
      if (current == PowerState::kOff) prefs = {"On", "ForceOn"};
      else prefs = {"ForceRestart", "GracefulRestart", "PowerCycle"};
      break;
  }
  const std::vector<std::string>& usable = allowed.empty() ? standard_reset_types() : allowed;
  for (const auto& p : prefs) {
    if (std::find(usable.begin(), usable.end(), p) != usable.end()) return p;
  }
  std::string wanted, have;
  for (const auto& p : prefs) wanted += (wanted.empty() ? "" : " or ") + p;
  for (const auto& a : usable) have += (have.empty() ? "" : ", ") + a;
  return Error(Code::kUnprocessable, std::string("redfish: cannot ") + verb_text(action) +
                                         ": the BMC does not allow ResetType " + wanted +
                                         " (allowed: " + have + ")");
}

// All a power read looks at: a sweep reads every BMC's system each minute,
// and building the whole resource (several KiB of inventory) was most of
// the parse.
constexpr std::string_view kPowerReadMembers[] = {"PowerState", "@odata.etag"};

asio::awaitable<Result<PowerState>> read_power_state(RedfishClient& client, PowerSettings s) {
  const Deadline deadline = Clock::now() + s.request_deadline;
  auto sys = co_await find_host_system(client, s.system_id, deadline, kPowerReadMembers);
  if (!sys) co_return sys.take_error();
  const std::string state = power_state_string(sys->resource);
  auto p = parse_redfish_power_state(state);
  if (!p) co_return PowerState::kUnknown;
  co_return *p;
}

asio::awaitable<Status> change_power_state(RedfishClient& client, PowerSettings s,
                                           PowerAction action, Logger log) {
  const Deadline deadline = Clock::now() + s.power_timeout;
  auto sys = co_await find_host_system(client, s.system_id, deadline);
  if (!sys) co_return sys.take_error();
  const std::string state_text = power_state_string(sys->resource);
  const PowerState current = parse_redfish_power_state(state_text).value_or(PowerState::kUnknown);
  const PowerState want = power_action_result(action);

  if ((action == PowerAction::kOn && current == PowerState::kOn) ||
      ((action == PowerAction::kOff || action == PowerAction::kSoftOff) &&
       current == PowerState::kOff && state_text == "Off")) {
    co_return ok_status();  // already there
  }

  nlohmann::json reset_action;
  if (sys->resource.contains("Actions") && sys->resource["Actions"].is_object()) {
    reset_action = sys->resource["Actions"].value("#ComputerSystem.Reset", nlohmann::json());
  }
  const std::string target =
      reset_action.is_object() ? reset_action.value("target", std::string()) : std::string();
  if (target.empty()) {
    co_return Error(Code::kUnprocessable,
                    "redfish: system " + sys->uri + " has no ComputerSystem.Reset action");
  }
  nlohmann::json action_info;
  const std::string info_uri = reset_action.value("@Redfish.ActionInfo", std::string());
  if (!reset_action.contains("ResetType@Redfish.AllowableValues") && !info_uri.empty()) {
    auto info = co_await client.get(info_uri, deadline);
    if (info) {
      action_info = std::move(info->body);
    } else if (info.error().code != Code::kNotFound) {
      co_return info.take_error();
    }
  }
  const std::vector<std::string> allowed = allowed_reset_types(reset_action, action_info);
  auto reset_type = choose_reset_type(action, current, allowed);
  if (!reset_type) co_return reset_type.take_error();

  log.info("redfish: reset", {{"system", sys->uri}, {"reset_type", *reset_type}, {"from", state_text}});
  const std::string body = reset_body(*reset_type).dump();
  std::map<std::string, std::string> no_headers;
  auto r = co_await client.send(verb::post, target, body, no_headers, deadline);
  if (!r) co_return r.take_error();
  if (r->status < 200 || r->status > 299) {
    co_return http_error("POST " + target + " (ResetType " + *reset_type + ")", r->status, r->body);
  }

  std::string last = state_text;
  for (;;) {
    auto now = co_await client.get(sys->uri, deadline);
    if (now) {
      last = power_state_string(now->body);
      const auto seen = parse_redfish_power_state(last);
      const std::string want_text = want == PowerState::kOn ? "On" : "Off";
      if (seen && *seen == want && last == want_text) co_return ok_status();
    } else if (now.error().code != Code::kTimeout) {
      co_return now.take_error();
    }
    if (Clock::now() + s.poll_interval >= deadline) {
      co_return Error(Code::kTimeout,
                      std::string("redfish: ") + verb_text(action) + " (ResetType " + *reset_type +
                          ") not reached within " +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(s.power_timeout).count()) +
                          " s; PowerState is " + last);
    }
    co_await sleep_for(s.poll_interval);
  }
}

}  // namespace kiln::redfish
