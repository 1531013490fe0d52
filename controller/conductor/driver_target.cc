#include "controller/conductor/driver_target.h"

#include <utility>

namespace kiln {

Result<DriverTarget> driver_target(const Node& node, const SecretBox& secrets) {
  DriverTarget t;
  t.node_id = node.id;
  t.bmc = node.bmc;
  t.boot_mode = node.boot_mode;
  for (const Port& p : node.ports) t.macs.push_back(p.address);
  if (!node.bmc.password_sealed.empty()) {
    Result<std::string> pw = secrets.open(node.bmc.password_sealed);
    if (!pw) return Error(Code::kInternal, "cannot decrypt the BMC password: " + pw.error().message);
    t.password = std::move(*pw);
  }
  return t;
}

}  // namespace kiln
