#pragma once
// Internal to RedfishService: the Redfish resource documents it serves and
// the replies that carry them, as pure functions (no back-end, no state, no
// I/O; safe on any thread). What the service decides lives in
// redfish_service.cc (routing, paging, faults), redfish_sessions.cc (login
// and authentication) and redfish_systems.cc (a ComputerSystem: GET, Boot
// PATCH, Reset); this file only says what the documents look like.
//
// Errors: none; a field that is missing or of the wrong type reads as empty.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/http/server.h"
#include "tools/vbmc/backend.h"

namespace kiln::vbmc::redfish_docs {

using nlohmann::json;

inline const std::string kRoot = "/redfish/v1";
inline const std::string kSystems = "/redfish/v1/Systems";
inline const std::string kSessionService = "/redfish/v1/SessionService";
inline const std::string kSessions = "/redfish/v1/SessionService/Sessions";

// --- Replies --------------------------------------------------------------

// A reply with the service's headers; `body` null means no body.
http::Response make_response(int status, const json& body);
// The same answer for a body already dumped (JSON text, not empty).
http::Response make_text_response(int status, std::string json_text);
// A Redfish error reply: Base registry `message_id` with `message`.
http::Response error(int status, const std::string& message_id, const std::string& message);

// --- Reading requests and documents ---------------------------------------

// j[key] when it is a string, else `fallback`.
std::string str(const json& j, const char* key, const char* fallback = "");
// The strings of a JSON array (other members skipped; empty when not an array).
std::vector<std::string> json_strings(const json& j);
// The value of header `name`, "" when absent.
std::string header(const http::Request& req, const char* name);

// --- Documents --------------------------------------------------------------

json link(const std::string& uri);
json collection(const std::string& uri, const std::string& type, const std::string& name,
                const std::vector<std::string>& members);
json version_pointer();  // GET /redfish
json generated_root();   // the service root of the generated tree
json session_service();
json session_resource(const std::string& id, const std::string& user);

// The boot targets a generated system allows.
std::vector<std::string> default_boot_targets();
json generated_system(const MachineState& s, const MachineHardware& h, const std::string& uri,
                      const std::vector<std::string>& resets, const std::string& etag);
// A sub-resource of a generated system (`rest` is the path below the system).
// Null when there is none.
json generated_part(const std::string& uri, const std::string& rest, const MachineHardware& h);
// Overlays the back-end's power and boot on a captured system resource;
// `forced_resets`, when not empty, replaces the Reset action's allowed types.
json overlay_system(json sys, const MachineState& s, const std::string& etag,
                    const std::vector<std::string>& forced_resets);
// "@Redfish.Settings" on a system, pointing at <uri>/Settings.
void add_settings_link(json& sys, const std::string& uri);
// <uri>/Settings: the pending Boot.
json settings_resource(const BootOverride& boot, const std::string& uri, const std::string& etag);

}  // namespace kiln::vbmc::redfish_docs
