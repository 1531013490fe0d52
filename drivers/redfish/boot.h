#pragma once
// Boot device override over Redfish.
//
// The override is one PATCH of the system's Boot object carrying the three
// properties together, because several BMCs (Supermicro among them) reject
// or half-apply a PATCH with only some of them:
//   {"Boot": {"BootSourceOverrideTarget": "Pxe"|"Hdd"|"UefiHttp",
//             "BootSourceOverrideEnabled": "Once"|"Continuous",
//             "BootSourceOverrideMode": "UEFI"|"Legacy"}}
// The mode is only sent when the system reports BootSourceOverrideMode (BMCs
// without it reject unknown properties). A target the system's
// BootSourceOverrideTarget@Redfish.AllowableValues does not list is refused
// with kUnprocessable before anything is sent.
//
// Systems with "@Redfish.Settings" take changes through their
// SettingsObject; the PATCH then goes there (and is confirmed there).
//
// ETags: the PATCH carries If-Match with the resource's ETag. BMCs disagree
// about weak ETags: some hand out W/"x" and then refuse it in If-Match, so a
// 412 is retried with the strong form "x", and a second 412 without If-Match
// at all (the ladder Ironic's sushy climbs). Finally the resource is read
// back; a BMC that accepted the PATCH but reports other values is an error.

#include <string>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/result.h"
#include "drivers/driver.h"
#include "drivers/redfish/client.h"
#include "drivers/redfish/discovery.h"

namespace kiln::redfish {

struct BootRequest {
  std::string target;   // Pxe | Hdd | UefiHttp
  std::string enabled;  // Once | Continuous
  std::string mode;     // UEFI | Legacy; empty = not sent
};

// The request for `device` on `system` (its resource). `boot_mode` is the
// node's ("uefi" | "bios"); `pxe_target` is what PXE means on this BMC ("Pxe"
// or "UefiHttp"). Errors: kUnprocessable when the system has no Boot object
// or does not allow the target.
Result<BootRequest> make_boot_request(const nlohmann::json& system, BootDevice device,
                                      bool persistent, std::string_view boot_mode,
                                      std::string_view pxe_target);

// {"Boot": {...}} for the PATCH.
nlohmann::json boot_patch_body(const BootRequest& req);

// Where the PATCH goes: the @Redfish.Settings SettingsObject when the system
// has one, else the system itself.
std::string boot_patch_uri(const std::string& system_uri, const nlohmann::json& system);

// W/"x" -> "x"; anything else unchanged.
std::string strong_etag(std::string_view etag);

// The If-Match values to try in turn: the ETag, then its strong form when it
// was weak, then "" (no If-Match). Without an ETag: just "".
std::vector<std::string> if_match_ladder(std::string_view etag);

// True when `resource`'s Boot object shows every property of `req`.
bool boot_matches(const nlohmann::json& resource, const BootRequest& req);

// Applies the override to the host system (see the file comment).
asio::awaitable<Status> apply_boot_override(RedfishClient& client, HostSystem system,
                                            BootRequest req, Deadline deadline);

}  // namespace kiln::redfish
