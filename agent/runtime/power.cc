#include "agent/runtime/power.h"

#include <sys/reboot.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace kiln::agent {

void execute_power_action(PowerAction action, const Logger& log) {
  const bool off = action == PowerAction::kPowerOff;
  log.info(off ? "powering off" : "rebooting");
  ::sync();
  ::reboot(off ? RB_POWER_OFF : RB_AUTOBOOT);
  log.warn("reboot(2) failed; trying busybox", {{"error", std::strerror(errno)}});
  const char* verb = off ? "poweroff" : "reboot";
  ::execlp("busybox", "busybox", verb, "-f", static_cast<char*>(nullptr));
  ::execlp(verb, verb, "-f", static_cast<char*>(nullptr));
  log.error("could not reboot or power off", {{"error", std::strerror(errno)}});
}

}  // namespace kiln::agent
