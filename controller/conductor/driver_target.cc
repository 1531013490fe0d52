#include "controller/conductor/driver_target.h"

#include <utility>

namespace kiln {

namespace {
// Opens the sealed BMC password into `t`.
Status open_password(const BmcInfo& bmc, const SecretBox& secrets, DriverTarget& t) {
  if (bmc.password_sealed.empty()) return ok_status();
  Result<std::string> pw = secrets.open(bmc.password_sealed);
  if (!pw) return Error(Code::kInternal, "cannot decrypt the BMC password: " + pw.error().message);
  t.password = std::move(*pw);
  return ok_status();
}
}  // namespace

Result<DriverTarget> driver_target(const Node& node, const SecretBox& secrets) {
  DriverTarget t;
  t.node_id = node.id;
  t.bmc = node.bmc;
  t.boot_mode = node.boot_mode;
  for (const Port& p : node.ports) t.macs.push_back(p.address);
  if (Status s = open_password(node.bmc, secrets, t); !s) return s.take_error();
  return t;
}

Result<DriverTarget> driver_target(const PowerSyncNode& node, const SecretBox& secrets) {
  DriverTarget t;
  t.node_id = node.id;
  t.bmc = node.bmc;
  if (Status s = open_password(node.bmc, secrets, t); !s) return s.take_error();
  return t;
}

}  // namespace kiln
