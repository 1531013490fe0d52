#include "controller/ironic/ironic_provision_request.h"

#include <string_view>

#include "controller/tenancy/config_drive.h"
#include "controller/tenancy/ssh_key.h"

namespace kiln::ironic {
namespace {

using E = ProvisionEvent;

// Ironic's verbs (ironic/common/states.py VERBS) and the microversion each
// needs (api/controllers/v1/utils.py MIN_VERB_VERSIONS, looked up by the
// target as sent: "undeploy" and "deleted" are not gated there, "deploy" is).
struct TargetRow {
  std::string_view target;
  std::optional<E> verb;     // nullopt: Ironic knows it, Kiln does not run it
  int min_minor;             // 0: any version
  std::string_view why_not;  // for verbs Kiln does not run
};

constexpr TargetRow kTargets[] = {
    {"manage", E::kManage, 4, ""},
    {"provide", E::kProvide, 4, ""},
    {"inspect", E::kInspect, 6, ""},
    {"active", E::kDeploy, 0, ""},
    {"deploy", E::kDeploy, 73, ""},
    {"deleted", E::kUndeploy, 0, ""},
    {"undeploy", E::kUndeploy, 0, ""},
    {"abort", E::kAbort, 13, ""},
    {"clean", std::nullopt, 15, ""},  // refused after its steps are checked (below)
    {"rebuild", std::nullopt, 0, "Kiln redeploys through undeploy (which wipes the disk) and deploy"},
    {"adopt", std::nullopt, 17, "Kiln does not adopt nodes deployed outside it"},
    {"rescue", std::nullopt, 38, "Kiln has no rescue ramdisk"},
    {"unrescue", std::nullopt, 38, "Kiln has no rescue ramdisk"},
};

// Ironic clean steps whose work Kiln's cleaning does (the agent's wipe).
constexpr std::string_view kWipeSteps[] = {"erase_devices", "erase_devices_metadata", "erase_devices_express"};
constexpr std::string_view kStepInterfaces[] = {"power", "management", "deploy", "bios", "raid"};

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool refuse(Refusal& why, int status, std::string message) {
  why.status = status;
  why.message = std::move(message);
  return false;
}

std::string type_name(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  return "a number";
}

// The object of a JSON body; a non-object is a 400.
bool body_object(const nlohmann::json& body, Refusal& why) {
  if (body.is_object()) return true;
  return refuse(why, 400, "the request body must be a JSON object, not " + type_name(body));
}

bool unknown_fields(const nlohmann::json& body, std::initializer_list<std::string_view> known, Refusal& why) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || it.key() == k;
    if (!ok) return refuse(why, 400, "Unknown field " + in_quotes(it.key()) + " in the request body");
  }
  return true;
}

// Checks clean_steps as Ironic's _CLEAN_STEPS_SCHEMA does, then names the
// first step Kiln has no equivalent for. Always refuses: Kiln's engine has
// no manual cleaning (a clean back to manageable); the message says what
// Kiln does instead.
bool check_clean_steps(const nlohmann::json& steps, Refusal& why) {
  if (!steps.is_array() || steps.empty())
    return refuse(why, 400, "\"clean_steps\" is required when setting target provision state to clean");
  for (size_t i = 0; i < steps.size(); ++i) {
    const nlohmann::json& s = steps[i];
    std::string at = "clean_steps/" + std::to_string(i);
    if (!s.is_object()) return refuse(why, 400, "Invalid clean_steps: " + at + " must be an object");
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != "interface" && it.key() != "step" && it.key() != "args")
        return refuse(why, 400, "Invalid clean_steps: " + at + ": unknown field " + in_quotes(it.key()));
    auto iface = s.find("interface");
    auto step = s.find("step");
    if (iface == s.end() || !iface->is_string())
      return refuse(why, 400, "Invalid clean_steps: " + at + "/interface is required (a string)");
    bool known_iface = false;
    for (std::string_view k : kStepInterfaces) known_iface = known_iface || *iface == k;
    if (!known_iface)
      return refuse(why, 400, "Invalid clean_steps: " + at + "/interface must be one of power, management, deploy, "
                              "bios, raid");
    if (step == s.end() || !step->is_string() || step->get_ref<const std::string&>().empty())
      return refuse(why, 400, "Invalid clean_steps: " + at + "/step is required (a non-empty string)");
    if (auto args = s.find("args"); args != s.end() && !args->is_object())
      return refuse(why, 400, "Invalid clean_steps: " + at + "/args must be an object");
    bool wipe = false;
    for (std::string_view k : kWipeSteps) wipe = wipe || (*iface == "deploy" && *step == k);
    if (!wipe)
      return refuse(why, 400, at + "/step: Kiln has no clean step " + iface->get<std::string>() + "." +
                                  step->get<std::string>() + " (its cleaning wipes the disks: deploy.erase_devices)");
  }
  return refuse(why, 400,
                "Kiln has no manual cleaning back to manageable: it wipes every disk (deploy.erase_devices) "
                "on provide and on undeploy; use target \"provide\"");
}

// An object whose every value is null or an empty array or object: a
// network_data of {"links": [], "networks": [], "services": []} configures
// nothing, and Ironic's clients send that shape.
bool carries_nothing(const nlohmann::json& obj) {
  for (const auto& v : obj)
    if (!v.is_null() && !((v.is_array() || v.is_object()) && v.empty())) return false;
  return true;
}

const std::string* string_at(const nlohmann::json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return nullptr;
  return &it->get_ref<const std::string&>();
}

}  // namespace

std::optional<ConfigDriveParts> parse_configdrive(const nlohmann::json& value, int minor, Refusal& why) {
  if (value.is_string()) {
    refuse(why, 400,
           "configdrive: a prebuilt config drive (a gzipped, base64-encoded ISO or its URL) is not supported: "
           "Kiln builds the drive; send an object with meta_data, user_data");
    return std::nullopt;
  }
  if (!value.is_object()) {
    refuse(why, 400, "configdrive must be an object or a string, not " + type_name(value));
    return std::nullopt;
  }
  if (minor < 56) {
    refuse(why, 400, "Providing a JSON object for configdrive is only supported starting with API version 1.56");
    return std::nullopt;
  }
  ConfigDriveParts out;
  for (auto it = value.begin(); it != value.end(); ++it) {
    const std::string& k = it.key();
    const nlohmann::json& v = it.value();
    if (k == "meta_data") {
      if (v.is_null()) continue;
      if (!v.is_object()) {
        refuse(why, 400, "configdrive/meta_data must be an object, not " + type_name(v));
        return std::nullopt;
      }
      if (auto keys = v.find("public_keys"); keys != v.end() && !keys->is_null()) {
        if (!keys->is_object()) {
          refuse(why, 400, "configdrive/meta_data/public_keys must be an object of name: key");
          return std::nullopt;
        }
        if (keys->size() > kMaxPublicKeys) {
          refuse(why, 400, "configdrive/meta_data/public_keys: at most " + std::to_string(kMaxPublicKeys) + " keys");
          return std::nullopt;
        }
        for (auto key = keys->begin(); key != keys->end(); ++key) {
          std::string field = "configdrive/meta_data/public_keys/" + key.key();
          if (!key->is_string()) {
            refuse(why, 400, field + " must be a string (an OpenSSH public key)");
            return std::nullopt;
          }
          Status ok = check_ssh_public_key(key->get_ref<const std::string&>(), "/" + field);
          if (!ok) {
            refuse(why, 400, field + ": " + ok.error().message);
            return std::nullopt;
          }
          out.ssh_keys.push_back(key->get<std::string>());
        }
      }
      for (std::string_view h : {"hostname", "local-hostname", "local_hostname", "name"}) {
        auto it2 = v.find(h);
        if (it2 == v.end() || it2->is_null()) continue;
        const std::string* name = string_at(v, h);
        // config_drive_hostname() gives back only a valid RFC 1123 name.
        if (name == nullptr || name->empty() || config_drive_hostname(*name, "00000000") != *name) {
          refuse(why, 400,
                 "configdrive/meta_data/" + std::string(h) +
                     " must be a host name (letters, digits, '-' and '.', labels of 1-63, at most 253)");
          return std::nullopt;
        }
        out.hostname = *name;
        break;
      }
    } else if (k == "user_data") {
      if (v.is_null()) continue;
      if (v.is_string()) {
        out.user_data = v.get<std::string>();
      } else if (v.is_object() || v.is_array()) {
        out.user_data = v.dump();  // as Ironic's build_configdrive: the JSON text
      } else {
        refuse(why, 400, "configdrive/user_data must be a string, an object or an array, not " + type_name(v));
        return std::nullopt;
      }
      if (out.user_data.size() > kMaxUserDataBytes) {
        refuse(why, 400, "configdrive/user_data: at most " + std::to_string(kMaxUserDataBytes) + " bytes");
        return std::nullopt;
      }
    } else if (k == "network_data" || k == "vendor_data") {
      if (v.is_null() || (v.is_object() && carries_nothing(v))) continue;
      if (!v.is_object()) {
        refuse(why, 400, "configdrive/" + k + " must be an object, not " + type_name(v));
        return std::nullopt;
      }
      if (k == "vendor_data" && minor < 59) {
        refuse(why, 400, "Providing vendor_data in configdrive is only supported starting with API version 1.59");
        return std::nullopt;
      }
      refuse(why, 400,
             "configdrive/" + k +
                 (k == "network_data"
                      ? " is not supported: Kiln's config drive configures DHCP on the node's ports"
                      : " is not supported: Kiln's config drive has no vendor part"));
      return std::nullopt;
    } else {
      refuse(why, 400, "configdrive: unknown field " + in_quotes(k) +
                           " (allowed: meta_data, network_data, user_data, vendor_data)");
      return std::nullopt;
    }
  }
  return out;
}

std::optional<OwnConfigDrive> own_config_drive(const Node& node) {
  if (!node.ironic.is_object()) return std::nullopt;
  auto info = node.ironic.find("instance_info");
  if (info == node.ironic.end() || !info->is_object()) return std::nullopt;
  auto cd = info->find(kConfigDriveKey);
  if (cd == info->end() || !cd->is_object()) return std::nullopt;
  Refusal why;
  std::optional<ConfigDriveParts> parts = parse_configdrive(*cd, 99, why);
  if (!parts) return std::nullopt;
  OwnConfigDrive out;
  out.access.ssh_keys = std::move(parts->ssh_keys);
  out.access.user_data = std::move(parts->user_data);
  out.hostname = std::move(parts->hostname);
  return out;
}

std::optional<ProvisionRequest> parse_provision_request(const nlohmann::json& body, int minor, Refusal& why) {
  if (!body_object(body, why)) return std::nullopt;
  if (!unknown_fields(body, {"target", "configdrive", "clean_steps", "deploy_steps", "rescue_password",
                             "disable_ramdisk"},
                      why))
    return std::nullopt;
  const std::string* target = string_at(body, "target");
  if (target == nullptr) {
    refuse(why, 400, "target is required (a string)");
    return std::nullopt;
  }
  const TargetRow* row = nullptr;
  for (const TargetRow& r : kTargets)
    if (r.target == *target) row = &r;
  if (row == nullptr) {
    refuse(why, 400, "The requested action " + in_quotes(*target) + " could not be understood.");
    return std::nullopt;
  }
  if (minor < row->min_minor) {
    refuse(why, 406, "The requested action " + in_quotes(*target) + " needs API version 1." +
                         std::to_string(row->min_minor) + " or later");
    return std::nullopt;
  }
  // Field types as Ironic's args.validate, then the per-target rules.
  auto present = [&](std::string_view k) {
    auto it = body.find(k);
    return it != body.end() && !it->is_null();
  };
  if (present("clean_steps") && !body["clean_steps"].is_array()) {
    refuse(why, 400, "clean_steps must be an array");
    return std::nullopt;
  }
  if (present("deploy_steps") && !body["deploy_steps"].is_array()) {
    refuse(why, 400, "deploy_steps must be an array");
    return std::nullopt;
  }
  if (present("rescue_password") && !body["rescue_password"].is_string()) {
    refuse(why, 400, "rescue_password must be a string");
    return std::nullopt;
  }
  if (present("disable_ramdisk") && !body["disable_ramdisk"].is_boolean()) {
    refuse(why, 400, "disable_ramdisk must be a boolean");
    return std::nullopt;
  }
  if (*target == "clean") {
    check_clean_steps(body.value("clean_steps", nlohmann::json()), why);
    return std::nullopt;
  }
  if (!row->verb) {
    refuse(why, 400, "The requested action " + in_quotes(*target) + " is not supported by Kiln: " +
                         std::string(row->why_not));
    return std::nullopt;
  }
  const bool deploy = *row->verb == E::kDeploy;
  if (present("clean_steps") && !body["clean_steps"].empty()) {
    refuse(why, 400, "\"clean_steps\" is only valid when setting target provision state to clean");
    return std::nullopt;
  }
  if (present("rescue_password")) {
    refuse(why, 400, "\"rescue_password\" is only valid when setting target provision state to rescue");
    return std::nullopt;
  }
  if (present("disable_ramdisk")) {
    refuse(why, 400, "\"disable_ramdisk\" is only valid when setting target provision state to clean");
    return std::nullopt;
  }
  if (present("deploy_steps") && !body["deploy_steps"].empty()) {
    refuse(why, 400, deploy ? "deploy_steps are not supported: Kiln runs its own deploy flow"
                            : "\"deploy_steps\" is only valid when setting target provision state to active");
    return std::nullopt;
  }
  ProvisionRequest out{*target, *row->verb, std::nullopt, nlohmann::json()};
  // Ironic ignores a falsy configdrive (check_allow_configdrive: `if not configdrive`).
  auto cd = body.find("configdrive");
  bool empty_cd = cd == body.end() || cd->is_null() || (cd->is_string() && cd->get_ref<const std::string&>().empty()) ||
                  (cd->is_object() && cd->empty());
  if (!empty_cd) {
    if (*target != "active") {
      refuse(why, 400, "Adding a config drive is only supported when setting provision state to active");
      return std::nullopt;
    }
    out.configdrive = parse_configdrive(*cd, minor, why);
    if (!out.configdrive) return std::nullopt;
    out.configdrive_object = *cd;
  }
  return out;
}

std::optional<std::string> deploy_image(const nlohmann::json& instance_info, Refusal& why) {
  const std::string* src = instance_info.is_object() ? string_at(instance_info, "image_source") : nullptr;
  if (src == nullptr || src->empty()) {
    refuse(why, 400,
           "instance_info/image_source is required to deploy: the name or UUID of an image registered with Kiln");
    return std::nullopt;
  }
  if (src->find("://") != std::string::npos) {
    refuse(why, 400,
           "instance_info/image_source is a URL: register the image with Kiln first (POST /v1/images with the URL "
           "as its source, or kiln image create) and set image_source to its name or UUID");
    return std::nullopt;
  }
  if (src->size() > 255) {
    refuse(why, 400, "instance_info/image_source: at most 255 characters (an image name or UUID)");
    return std::nullopt;
  }
  return *src;
}

std::optional<PowerRequest> parse_power_request(const nlohmann::json& body, int minor, Refusal& why) {
  if (!body_object(body, why)) return std::nullopt;
  if (!unknown_fields(body, {"target", "timeout"}, why)) return std::nullopt;
  const std::string* target = string_at(body, "target");
  if (target == nullptr) {
    refuse(why, 400, "target is required (a string)");
    return std::nullopt;
  }
  PowerRequest out{*target, PowerAction::kOn, std::nullopt};
  if (auto t = body.find("timeout"); t != body.end() && !t->is_null()) {
    if (!t->is_number_integer() || t->get<int64_t>() < 1) {
      refuse(why, 400, "timeout has to be positive integer");
      return std::nullopt;
    }
    out.timeout = t->get<int64_t>();
  }
  bool soft = *target == "soft power off" || *target == "soft rebooting";
  if ((soft || out.timeout) && minor < 27) {
    refuse(why, 406, "soft power targets and timeout need API version 1.27 or later");
    return std::nullopt;
  }
  if (*target == "power on") {
    out.action = PowerAction::kOn;
  } else if (*target == "power off") {
    out.action = PowerAction::kOff;
  } else if (*target == "rebooting") {
    out.action = PowerAction::kReboot;
  } else if (*target == "soft power off") {
    out.action = PowerAction::kSoftOff;
  } else if (*target == "soft rebooting") {
    refuse(why, 400,
           "The target state \"soft rebooting\" is not supported by Kiln's drivers; use \"rebooting\", or "
           "\"soft power off\" then \"power on\"");
    return std::nullopt;
  } else {
    refuse(why, 400, "Invalid state " + in_quotes(*target) +
                         " requested: target must be one of power on, power off, rebooting, soft power off, "
                         "soft rebooting");
    return std::nullopt;
  }
  return out;
}

std::optional<std::string> parse_maintenance_reason(const nlohmann::json& body, Refusal& why) {
  if (body.is_null()) return std::string();
  if (!body_object(body, why)) return std::nullopt;
  if (!unknown_fields(body, {"reason"}, why)) return std::nullopt;
  auto r = body.find("reason");
  if (r == body.end() || r->is_null()) return std::string();
  if (!r->is_string()) {
    refuse(why, 400, "reason must be a string");
    return std::nullopt;
  }
  if (r->get_ref<const std::string&>().size() > 1024) {
    refuse(why, 400, "reason: at most 1024 characters");
    return std::nullopt;
  }
  return r->get<std::string>();
}

}  // namespace kiln::ironic
