#include "tools/vbmc/backend.h"

#include <algorithm>

namespace kiln::vbmc {

const std::vector<std::string>& standard_reset_types() {
  static const std::vector<std::string> all = {"On",         "ForceOff", "GracefulShutdown",
                                               "ForceRestart", "GracefulRestart", "PowerCycle",
                                               "ForceOn",    "Nmi",      "PushPowerButton"};
  return all;
}

bool is_known_boot_target(const std::string& target) {
  static const std::vector<std::string> all = {"None", "Pxe", "Hdd", "Cd", "Usb", "BiosSetup",
                                               "UefiHttp", "UefiShell", "Floppy", "Diags",
                                               "Utilities", "SDCard", "UefiTarget", "UsbCd"};
  return std::find(all.begin(), all.end(), target) != all.end();
}

}  // namespace kiln::vbmc
