#include "drivers/redfish/boot.h"

#include <algorithm>
#include <map>

#include "drivers/redfish/errors.h"

namespace kiln::redfish {

namespace {

using http::bhttp::verb;

std::string boot_str(const nlohmann::json& resource, const char* key) {
  if (!resource.is_object()) return {};
  auto boot = resource.find("Boot");
  if (boot == resource.end() || !boot->is_object()) return {};
  auto it = boot->find(key);
  return it != boot->end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string describe_boot(const nlohmann::json& resource) {
  return "Target=" + boot_str(resource, "BootSourceOverrideTarget") +
         " Enabled=" + boot_str(resource, "BootSourceOverrideEnabled") +
         " Mode=" + boot_str(resource, "BootSourceOverrideMode");
}

}  // namespace

Result<BootRequest> make_boot_request(const nlohmann::json& system, BootDevice device,
                                      bool persistent, std::string_view boot_mode,
                                      std::string_view pxe_target) {
  auto boot = system.is_object() ? system.find("Boot") : system.end();
  if (!system.is_object() || boot == system.end() || !boot->is_object()) {
    return Error(Code::kUnprocessable, "redfish: the system has no Boot object; boot override unsupported");
  }
  BootRequest req;
  req.target = device == BootDevice::kPxe ? std::string(pxe_target) : std::string("Hdd");
  req.enabled = persistent ? "Continuous" : "Once";
  if (boot->contains("BootSourceOverrideMode")) req.mode = boot_mode == "bios" ? "Legacy" : "UEFI";
  auto allowed = boot->find("BootSourceOverrideTarget@Redfish.AllowableValues");
  if (allowed != boot->end() && allowed->is_array() && !allowed->empty()) {
    bool ok = false;
    std::string list;
    for (const auto& v : *allowed) {
      if (!v.is_string()) continue;
      if (v.get<std::string>() == req.target) ok = true;
      list += (list.empty() ? "" : ", ") + v.get<std::string>();
    }
    if (!ok) {
      return Error(Code::kUnprocessable, "redfish: the BMC does not allow BootSourceOverrideTarget " +
                                             req.target + " (allowed: " + list + ")");
    }
  }
  return req;
}

nlohmann::json boot_patch_body(const BootRequest& req) {
  nlohmann::json boot = {{"BootSourceOverrideTarget", req.target},
                         {"BootSourceOverrideEnabled", req.enabled}};
  if (!req.mode.empty()) boot["BootSourceOverrideMode"] = req.mode;
  return nlohmann::json{{"Boot", boot}};
}

std::string boot_patch_uri(const std::string& system_uri, const nlohmann::json& system) {
  std::string settings = link_of(system, "@Redfish.Settings", "SettingsObject");
  return settings.empty() ? system_uri : settings;
}

std::string strong_etag(std::string_view etag) {
  if (etag.size() > 2 && (etag.substr(0, 2) == "W/" || etag.substr(0, 2) == "w/")) {
    return std::string(etag.substr(2));
  }
  return std::string(etag);
}

std::vector<std::string> if_match_ladder(std::string_view etag) {
  std::vector<std::string> out;
  if (!etag.empty()) {
    out.emplace_back(etag);
    std::string strong = strong_etag(etag);
    if (strong != etag) out.push_back(std::move(strong));
  }
  out.emplace_back();
  return out;
}

bool boot_matches(const nlohmann::json& resource, const BootRequest& req) {
  if (boot_str(resource, "BootSourceOverrideTarget") != req.target) return false;
  if (boot_str(resource, "BootSourceOverrideEnabled") != req.enabled) return false;
  return req.mode.empty() || boot_str(resource, "BootSourceOverrideMode") == req.mode;
}

asio::awaitable<Status> apply_boot_override(RedfishClient& client, HostSystem system,
                                            BootRequest req, Deadline deadline) {
  const std::string uri = boot_patch_uri(system.uri, system.resource);
  std::string etag = system.etag;
  if (uri != system.uri) {
    auto settings = co_await client.get(uri, deadline);
    if (!settings) co_return settings.take_error();
    etag = etag_of(*settings);
  }
  const std::string body = boot_patch_body(req).dump();
  const std::vector<std::string> ladder = if_match_ladder(etag);
  RfResponse last;
  for (const auto& if_match : ladder) {
    std::map<std::string, std::string> headers;
    if (!if_match.empty()) headers["If-Match"] = if_match;
    auto r = co_await client.send(verb::patch, uri, body, headers, deadline);
    if (!r) co_return r.take_error();
    last = std::move(*r);
    if (last.status != 412) break;
  }
  if (last.status < 200 || last.status > 299) {
    co_return http_error("PATCH " + uri + " Boot", last.status, last.body);
  }
  auto check = co_await client.get(uri, deadline);
  if (!check) co_return check.take_error();
  if (!boot_matches(check->body, req)) {
    co_return Error(Code::kDriverError, "redfish: the BMC accepted the boot override (Target=" +
                                            req.target + " Enabled=" + req.enabled + " Mode=" + req.mode +
                                            ") but " + uri + " reports " + describe_boot(check->body));
  }
  co_return ok_status();
}

}  // namespace kiln::redfish
