#pragma once
// Power over Redfish: PowerState reads and ComputerSystem.Reset.
//
// The ResetType is chosen from what the BMC says it allows, never assumed:
// the action's ResetType@Redfish.AllowableValues, else the Parameters of the
// action's @Redfish.ActionInfo resource. A BMC that says nothing is taken to
// allow the standard values. Kiln's verbs map to preference lists (first
// allowed wins):
//   on       -> On, ForceOn
//   off      -> ForceOff
//   soft_off -> GracefulShutdown
//   reboot   -> ForceRestart, GracefulRestart, PowerCycle   (system on)
//               On, ForceOn                                 (system off)
// When none is allowed the call fails with kUnprocessable naming the values
// the BMC does allow, before anything is sent.
//
// After the action the driver polls PowerState until the wanted state is seen
// or the power deadline passes (kTimeout naming the last state seen).

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/result.h"
#include "drivers/power.h"
#include "drivers/redfish/client.h"

namespace kiln::redfish {

// Redfish PowerState -> Kiln. "On"/"PoweringOn"/"Paused" are on,
// "Off"/"PoweringOff" off; anything else is nullopt.
std::optional<PowerState> parse_redfish_power_state(std::string_view redfish_state);

// The ResetType values the BMC allows: from the action object
// ("#ComputerSystem.Reset") or, when it has none, from its ActionInfo
// resource (pass null when it has none or was not read). Empty = not said.
std::vector<std::string> allowed_reset_types(const nlohmann::json& reset_action,
                                             const nlohmann::json& action_info);

// The ResetType for `action` on a system currently `current`. Errors:
// kUnprocessable naming the allowed values when none of the preferred ones is.
Result<std::string> choose_reset_type(PowerAction action, PowerState current,
                                      const std::vector<std::string>& allowed);

struct PowerSettings {
  std::string system_id;
  std::chrono::milliseconds request_deadline{120000};
  std::chrono::milliseconds power_timeout{60000};
  std::chrono::milliseconds poll_interval{1000};
};

// Reads the host system's PowerState.
asio::awaitable<Result<PowerState>> read_power_state(RedfishClient& client, PowerSettings s);

// Requests `action` and waits for its resulting state (see file comment).
// Errors: kUnprocessable (reset type not allowed, no Reset action),
// kTimeout, kDriverError with the BMC's words, kUnauthenticated.
asio::awaitable<Status> change_power_state(RedfishClient& client, PowerSettings s,
                                           PowerAction action, Logger log);

}  // namespace kiln::redfish
