// RedfishService: one ComputerSystem (redfish_service.h): its GET (captured
// or generated, with power and boot from the back-end and an ETag over them),
// the Boot PATCH (on the system or on its settings object, honouring If-Match
// and the --etag-quirk), and the Reset action.

#include "tools/vbmc/redfish_service.h"

#include <algorithm>

#include "common/crypto.h"
#include "tools/vbmc/redfish_documents.h"

namespace kiln::vbmc {

using namespace redfish_docs;

namespace {

// Everything a generated system's body is made from besides its URI: the
// ETag (id, power and boot), the names, the hardware and the reset types,
// each prefixed with its length so no two different sets read the same.
std::string made_of_text(const std::string& etag, const MachineState& s, const MachineHardware& hw,
                         const std::vector<std::string>& resets) {
  std::string out;
  const auto add = [&out](const std::string& v) { out += std::to_string(v.size()) + ':' + v; };
  for (const std::string* v : {&etag, &s.name, &s.uuid}) add(*v);
  add(std::to_string(hw.cpus) + ' ' + std::to_string(hw.memory_mib) + ' ' + std::to_string(hw.disks.size()) + ' ' +
      std::to_string(hw.macs.size()));
  for (const MachineDisk& d : hw.disks) {
    add(d.name);
    add(d.source);
    add(std::to_string(d.size_bytes));
  }
  for (const std::string& m : hw.macs) add(m);
  for (const std::string& t : resets) add(t);
  return out;
}

}  // namespace

std::vector<std::string> RedfishService::allowed_resets(const std::string& system_uri) const {
  if (!opts_.allowed_reset_types.empty()) return opts_.allowed_reset_types;
  if (tree_) {
    auto sys = tree_->load(system_uri);
    if (sys && sys->contains("Actions") && (*sys)["Actions"].contains("#ComputerSystem.Reset")) {
      const json& a = (*sys)["Actions"]["#ComputerSystem.Reset"];
      auto v = json_strings(a.value("ResetType@Redfish.AllowableValues", json()));
      if (!v.empty()) return v;
      auto info = tree_->load(str(a, "@Redfish.ActionInfo"));
      if (info && info->contains("Parameters")) {
        for (const auto& p : (*info)["Parameters"]) {
          if (str(p, "Name") == "ResetType") {
            auto w = json_strings(p.value("AllowableValues", json()));
            if (!w.empty()) return w;
          }
        }
      }
    }
  }
  return standard_reset_types();
}

std::string RedfishService::etag_for(const MachineState& s) const {
  const std::string tag = "\"" +
                          sha256_hex(s.id + "|" + (s.powered_on ? "on" : "off") + "|" + s.boot.target +
                                     "|" + s.boot.enabled + "|" + s.boot.mode)
                              .substr(0, 16) +
                          "\"";
  return opts_.etag_quirk == "weak" ? "W/" + tag : tag;
}

asio::awaitable<http::Response> RedfishService::system_get(const std::string& id,
                                                           const std::string& uri) {
  auto st = co_await backend_.state(id);
  if (!st) co_return error(st.error().code == Code::kNotFound ? 404 : 500, "InternalError", st.error().message);
  const std::string etag = etag_for(*st);
  std::string text;
  if (tree_) {
    auto captured = tree_->load(uri);
    if (!captured) co_return error(404, "ResourceMissingAtURI", "The resource at the URI " + uri + " was not found.");
    json body = overlay_system(std::move(*captured), *st, etag, opts_.allowed_reset_types);
    if (opts_.settings_object) add_settings_link(body, uri);
    text = body.dump(2);
  } else {
    auto hw = co_await backend_.hardware(id);
    if (!hw) co_return error(500, "InternalError", hw.error().message);
    const std::vector<std::string> resets = allowed_resets(uri);
    std::string made_of = made_of_text(etag, *st, *hw, resets);
    if (std::optional<std::string> kept = rendered_system(uri, made_of)) {
      text = std::move(*kept);
    } else {
      json body = generated_system(*st, *hw, uri, resets, etag);
      if (opts_.settings_object) add_settings_link(body, uri);
      text = body.dump(2);
      keep_rendered_system(uri, std::move(made_of), text);
    }
  }
  http::Response r = make_text_response(200, std::move(text));
  r.set(http::bhttp::field::etag, etag);
  co_return r;
}

std::optional<std::string> RedfishService::rendered_system(const std::string& uri, const std::string& made_of) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = rendered_.find(uri);
  if (it == rendered_.end() || it->second.made_of != made_of) return std::nullopt;
  return it->second.body;
}

void RedfishService::keep_rendered_system(const std::string& uri, std::string made_of, std::string body) {
  std::lock_guard<std::mutex> lock(mu_);
  rendered_[uri] = RenderedSystem{std::move(made_of), std::move(body)};
}

asio::awaitable<http::Response> RedfishService::settings_get(const std::string& id,
                                                             const std::string& uri) {
  auto st = co_await backend_.state(id);
  if (!st) co_return error(st.error().code == Code::kNotFound ? 404 : 500, "InternalError", st.error().message);
  const std::string etag = etag_for(*st);
  http::Response r = make_response(200, settings_resource(st->boot, uri, etag));
  r.set(http::bhttp::field::etag, etag);
  co_return r;
}

// PATCH of Boot on the system, or (settings) on its settings object, where
// the pending values are applied at once.
asio::awaitable<http::Response> RedfishService::system_patch(const http::Request& req,
                                                             const std::string& id,
                                                             const std::string& uri, bool settings) {
  auto st = co_await backend_.state(id);
  if (!st) co_return error(500, "InternalError", st.error().message);
  const std::string etag = etag_for(*st);
  const std::string if_match = header(req, "If-Match");
  if (!if_match.empty()) {
    bool match = if_match == "*";
    if (opts_.etag_quirk == "weak") match = match || if_match == etag.substr(2);  // strong form only
    else if (opts_.etag_quirk == "none") match = match || if_match == etag;
    if (!match) {
      co_return error(412, "PreconditionFailed",
                      "The ETag supplied did not match the ETag required to change this resource.");
    }
  }
  const json body = json::parse(req.body(), nullptr, false);
  if (!body.is_object()) co_return error(400, "MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.");
  if (!body.contains("Boot") || !body["Boot"].is_object()) {
    co_return error(400, "PropertyNotWritable", "Only the Boot property of this system can be changed.");
  }
  const json& boot = body["Boot"];
  BootOverride next = st->boot;
  std::vector<std::string> targets = default_boot_targets();
  if (tree_) {
    auto captured = tree_->load(uri);
    if (captured && captured->contains("Boot")) {
      auto v = json_strings((*captured)["Boot"].value("BootSourceOverrideTarget@Redfish.AllowableValues", json()));
      if (!v.empty()) targets = v;
    }
  }
  if (boot.contains("BootSourceOverrideTarget")) {
    const std::string t = str(boot, "BootSourceOverrideTarget");
    if (std::find(targets.begin(), targets.end(), t) == targets.end()) {
      co_return error(400, "PropertyValueNotInList",
                      "The value '" + t + "' for the property BootSourceOverrideTarget is not in the list of acceptable values.");
    }
    next.target = t;
  }
  if (boot.contains("BootSourceOverrideEnabled")) {
    const std::string e = str(boot, "BootSourceOverrideEnabled");
    if (e != "Once" && e != "Continuous" && e != "Disabled") {
      co_return error(400, "PropertyValueNotInList",
                      "The value '" + e + "' for the property BootSourceOverrideEnabled is not in the list of acceptable values.");
    }
    next.enabled = e;
  }
  if (boot.contains("BootSourceOverrideMode")) {
    const std::string m = str(boot, "BootSourceOverrideMode");
    if (m != "UEFI" && m != "Legacy") {
      co_return error(400, "PropertyValueNotInList",
                      "The value '" + m + "' for the property BootSourceOverrideMode is not in the list of acceptable values.");
    }
    next.mode = m;
  }
  Status s = co_await backend_.set_boot(id, next);
  if (!s) co_return error(s.error().code == Code::kInvalidArgument ? 400 : 500, "GeneralError", s.error().message);
  log_.info("vbmc: boot override", {{"system", id}, {"target", next.target}, {"enabled", next.enabled}, {"mode", next.mode}});
  if (settings) co_return co_await settings_get(id, uri);
  co_return co_await system_get(id, uri);
}

asio::awaitable<http::Response> RedfishService::system_reset(const http::Request& req,
                                                             const std::string& id,
                                                             const std::string& uri) {
  const json body = json::parse(req.body(), nullptr, false);
  if (!body.is_object() || !body.contains("ResetType") || !body["ResetType"].is_string()) {
    co_return error(400, "ActionParameterMissing",
                    "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.");
  }
  const std::string type = body["ResetType"].get<std::string>();
  const std::vector<std::string> allowed = allowed_resets(uri);
  if (std::find(allowed.begin(), allowed.end(), type) == allowed.end()) {
    co_return error(400, "ActionParameterValueNotInList",
                    "The value '" + type + "' for the parameter ResetType in the action ComputerSystem.Reset is not in the list of acceptable values.");
  }
  Status s = co_await backend_.reset(id, type);
  if (!s) co_return error(s.error().code == Code::kInvalidArgument ? 400 : 500, "GeneralError", s.error().message);
  log_.info("vbmc: reset", {{"system", id}, {"reset_type", type}});
  co_return make_response(204, json());
}

}  // namespace kiln::vbmc
