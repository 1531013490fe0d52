#pragma once
// Rebooting or powering off the node from the agent: sync, then reboot(2);
// when the syscall is refused (not PID 1's namespace, no CAP_SYS_BOOT) fall
// back to `busybox reboot -f` / `busybox poweroff -f`. Does not return on
// success.

#include "common/log.h"

namespace kiln::agent {

enum class PowerAction { kReboot, kPowerOff };

void execute_power_action(PowerAction action, const Logger& log);

}  // namespace kiln::agent
