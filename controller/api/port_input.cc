#include "controller/api/port_input.h"

#include <optional>
#include <vector>

#include "controller/api/json_input.h"
#include "controller/api/node_input.h"

namespace kiln::api {

Result<PortInput> parse_port_create(const nlohmann::json& body) {
  std::vector<FieldError> errors;
  ObjectReader r(body, "", errors);
  std::optional<std::string> node = r.string("node", true);
  std::optional<std::string> address = r.string("address", true);
  bool pxe = r.boolean("pxe").value_or(true);
  r.finish();
  std::optional<std::string> mac;
  if (address) {
    mac = normalize_mac(*address);
    if (!mac) errors.push_back({"/address", "must be a MAC address (six hex pairs separated by ':' or '-')"});
  }
  if (!errors.empty()) return invalid_fields(std::move(errors));
  return PortInput{*node, *mac, pxe};
}

}  // namespace kiln::api
