#pragma once
// Power state and power verbs: what every power capability reads and sets,
// and what the Node record and the API show. Names only (like states.h in
// controller/model, which holds the provisioning states); pure functions.

#include <optional>
#include <string_view>

namespace kiln {

enum class PowerState { kOn, kOff, kUnknown };
std::string_view to_string(PowerState s);
std::optional<PowerState> parse_power_state(std::string_view s);

// Power verbs accepted by PUT /v1/nodes/{id}/states/power.
enum class PowerAction { kOn, kOff, kReboot, kSoftOff };
std::string_view to_string(PowerAction a);
std::optional<PowerAction> parse_power_action(std::string_view s);
// The power state an action ends in (reboot ends "on").
PowerState power_action_result(PowerAction a);

}  // namespace kiln
