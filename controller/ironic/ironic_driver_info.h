#pragma once
// Ironic's hardware types and driver_info keys <-> Kiln's driver and BMC
// block (drivers/bmc.h).
//
//   redfish        -> redfish: redfish_address -> bmc.address (a URL or
//                     host[:port], as written), redfish_username,
//                     redfish_password (sealed), redfish_system_id ->
//                     bmc.system_id, redfish_verify_ca: a boolean (or
//                     Ironic's boolean strings) -> bmc.verify_tls, any other
//                     string is a CA file -> verify_tls and
//                     bmc.options.ca_file.
//   ipmi           -> ipmi: ipmi_address + ipmi_port (an integer or digits)
//                     -> bmc.address "host:port", ipmi_username,
//                     ipmi_password (sealed).
//   fake-hardware  -> fake: nothing mapped.
//
// Every key is also kept, exactly as written, in the node's Ironic document
// (Node::ironic["driver_info"]), so a client reads back what it wrote
// (Metal3 re-patches any difference) - except the password, which lives
// only sealed in the BMC block and reads back as "******". Writing "******"
// back leaves the password as it is (a client re-sending what it read).
// Any other secret-looking key (password, secret, token, *_key) is refused:
// Kiln stores one sealed BMC password per node and no secret in plain JSON.
//
// Pure functions; any thread.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "controller/model/node.h"

namespace kiln::ironic {

inline constexpr std::string_view kMaskedSecret = "******";

// Kiln's driver for an Ironic hardware type; nullopt for one Kiln lacks.
std::optional<std::string_view> kiln_driver_for(std::string_view ironic_driver);

// The Ironic hardware type a node shows: the one it was enrolled or patched
// with when that still maps to its Kiln driver, else the Kiln driver's own
// (fake -> fake-hardware; a driver with no Ironic type, libvirt, by its name).
std::string ironic_driver_of(const Node& node);

// What a driver_info object asks of the BMC block.
struct DriverInfoChange {
  BmcInfo bmc;                          // from `bmc_before`, with the mapped keys applied; password untouched
  bool password_clear = false;          // the password key is absent
  std::optional<std::string> password;  // a new password to seal; never log
  nlohmann::json stored;                // driver_info to keep: as written, the password key taken out
};

// Reads `driver_info` (an object or null) for `ironic_driver` onto a copy of
// `bmc_before`. Field errors name "/driver_info/<key>" and are appended to
// `errors`. The driver's own validation (reachable address shape etc.) is
// the conductor's (Conductor::validate_bmc), run by the caller.
DriverInfoChange read_driver_info(std::string_view ironic_driver, const nlohmann::json& driver_info,
                                  const BmcInfo& bmc_before, std::vector<FieldError>& errors);

// driver_info as a client reads it: the stored keys as written, the mapped
// ones re-derived from the BMC block where it changed since (through /v1),
// the password key "******" when a password is set.
nlohmann::json driver_info_view(const Node& node);

// A field of the BMC block named as Ironic's driver_info key, for errors the
// conductor raises ("/bmc/address" -> "/driver_info/redfish_address").
std::string driver_info_field(std::string_view ironic_driver, std::string_view bmc_field);

}  // namespace kiln::ironic
