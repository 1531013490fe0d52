#include "drivers/power.h"

namespace kiln {

std::string_view to_string(PowerState s) {
  switch (s) {
    case PowerState::kOn: return "on";
    case PowerState::kOff: return "off";
    case PowerState::kUnknown: return "unknown";
  }
  return "unknown";
}

std::optional<PowerState> parse_power_state(std::string_view s) {
  if (s == "on") return PowerState::kOn;
  if (s == "off") return PowerState::kOff;
  if (s == "unknown") return PowerState::kUnknown;
  return std::nullopt;
}

std::string_view to_string(PowerAction a) {
  switch (a) {
    case PowerAction::kOn: return "on";
    case PowerAction::kOff: return "off";
    case PowerAction::kReboot: return "reboot";
    case PowerAction::kSoftOff: return "soft_off";
  }
  return "?";
}

std::optional<PowerAction> parse_power_action(std::string_view s) {
  if (s == "on") return PowerAction::kOn;
  if (s == "off") return PowerAction::kOff;
  if (s == "reboot") return PowerAction::kReboot;
  if (s == "soft_off") return PowerAction::kSoftOff;
  return std::nullopt;
}

PowerState power_action_result(PowerAction a) {
  return (a == PowerAction::kOff || a == PowerAction::kSoftOff) ? PowerState::kOff : PowerState::kOn;
}

}  // namespace kiln
