#include "controller/ironic/ironic_driver_info.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "controller/api/json_input.h"

namespace kiln::ironic {
namespace {

using nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The password key Kiln maps for a driver ("" when none).
std::string_view password_key(std::string_view ironic_driver) {
  if (ironic_driver == "redfish") return "redfish_password";
  if (ironic_driver == "ipmi") return "ipmi_password";
  return "";
}

// oslo's strutils.bool_from_string(strict=True) vocabulary, as Ironic reads
// boolean strings.
std::optional<bool> bool_string(std::string_view s) {
  const std::string v = lower(s);
  if (v == "true" || v == "1" || v == "yes" || v == "y" || v == "on" || v == "t") return true;
  if (v == "false" || v == "0" || v == "no" || v == "n" || v == "off" || v == "f") return false;
  return std::nullopt;
}

bool secret_named(std::string_view key) {
  const std::string k = lower(key);
  return k.find("password") != std::string::npos || k.find("secret") != std::string::npos ||
         k.find("token") != std::string::npos || k.ends_with("_key") || k.find("passphrase") != std::string::npos;
}

std::string pointer(std::string_view key) { return api::json_pointer_append("/driver_info", key); }

// A string member, or nullopt (absent/null); a non-string is an error.
std::optional<std::string> string_member(const json& o, std::string_view key, std::vector<FieldError>& errors) {
  auto it = o.find(std::string(key));
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) {
    errors.push_back({pointer(key), "must be a string"});
    return std::nullopt;
  }
  return it->get<std::string>();
}

// host and port of an address "host", "host:port", "[v6]:port" or a bare v6.
std::pair<std::string, std::string> split_host_port(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    std::size_t close = address.find(']');
    if (close != std::string::npos) {
      std::string host = address.substr(1, close - 1);
      std::string port = close + 2 <= address.size() && address[close + 1] == ':' ? address.substr(close + 2) : "";
      return {host, port};
    }
  }
  std::size_t colon = address.find(':');
  if (colon != std::string::npos && address.find(':', colon + 1) == std::string::npos)
    return {address.substr(0, colon), address.substr(colon + 1)};
  return {address, ""};
}

// The BMC fields the mapped keys of `stored` give, for comparing with the
// node's current BMC block.
BmcInfo mapped_bmc(std::string_view driver, const json& stored, const BmcInfo& current) {
  std::vector<FieldError> ignored;
  DriverInfoChange c = read_driver_info(driver, stored, current, ignored);
  return c.bmc;
}

// Ironic's fake-hardware takes no driver_info, but Kiln's fake driver wants
// a BMC address (it never connects to it; its power state is kept per node
// id): a node keeps the one it had (enrolled through /v1), else gets the
// hardware type's name. Without this a client creating a fake-hardware node
// as Ironic documents it was refused "/bmc/address: is required".
std::string fake_hardware_address(const BmcInfo& before) {
  if (before.driver == "fake" && !before.address.empty()) return before.address;
  return "fake-hardware";
}

}  // namespace

std::optional<std::string_view> kiln_driver_for(std::string_view ironic_driver) {
  if (ironic_driver == "redfish") return "redfish";
  if (ironic_driver == "ipmi") return "ipmi";
  if (ironic_driver == "fake-hardware") return "fake";
  return std::nullopt;
}

std::string ironic_driver_of(const Node& node) {
  if (node.ironic.is_object()) {
    auto it = node.ironic.find("driver");
    if (it != node.ironic.end() && it->is_string()) {
      std::optional<std::string_view> k = kiln_driver_for(it->get<std::string>());
      if (k && *k == node.bmc.driver) return it->get<std::string>();
    }
  }
  if (node.bmc.driver == "fake") return "fake-hardware";
  return node.bmc.driver;
}

DriverInfoChange read_driver_info(std::string_view ironic_driver, const json& driver_info,
                                  const BmcInfo& bmc_before, std::vector<FieldError>& errors) {
  DriverInfoChange out;
  out.bmc = bmc_before;
  out.stored = json::object();
  if (std::optional<std::string_view> k = kiln_driver_for(ironic_driver)) out.bmc.driver = std::string(*k);
  if (driver_info.is_null()) {
    out.password_clear = true;
    out.bmc.address.clear();
    out.bmc.username.clear();
    out.bmc.system_id.clear();
    if (ironic_driver == "fake-hardware") out.bmc.address = fake_hardware_address(bmc_before);
    return out;
  }
  if (!driver_info.is_object()) {
    errors.push_back({"/driver_info", "must be an object"});
    return out;
  }
  const std::string_view pw_key = password_key(ironic_driver);
  for (const auto& [key, value] : driver_info.items()) {
    if (!pw_key.empty() && key == pw_key) continue;
    if (secret_named(key)) {
      errors.push_back({pointer(key),
                        "Kiln keeps one sealed BMC password per node" +
                            (pw_key.empty() ? std::string() : " (" + std::string(pw_key) + ")") +
                            " and stores no other secret; remove this key"});
      continue;
    }
    out.stored[key] = value;
  }
  // The password: absent clears it, the mask keeps it, a string replaces it.
  if (!pw_key.empty()) {
    auto it = driver_info.find(std::string(pw_key));
    if (it == driver_info.end() || it->is_null()) {
      out.password_clear = true;
    } else if (!it->is_string()) {
      errors.push_back({pointer(pw_key), "must be a string"});
    } else if (it->get<std::string>() != kMaskedSecret) {
      out.password = it->get<std::string>();
    }
  }

  if (ironic_driver == "redfish") {
    out.bmc.address = string_member(driver_info, "redfish_address", errors).value_or("");
    out.bmc.username = string_member(driver_info, "redfish_username", errors).value_or("");
    out.bmc.system_id = string_member(driver_info, "redfish_system_id", errors).value_or("");
    out.bmc.verify_tls = true;
    if (out.bmc.options.is_object()) out.bmc.options.erase("ca_file");
    auto v = driver_info.find("redfish_verify_ca");
    if (v != driver_info.end() && !v->is_null()) {
      if (v->is_boolean()) {
        out.bmc.verify_tls = v->get<bool>();
      } else if (v->is_string()) {
        const std::string s = v->get<std::string>();
        if (std::optional<bool> b = bool_string(s)) {
          out.bmc.verify_tls = *b;
        } else if (!s.empty() && s.front() == '/') {
          if (!out.bmc.options.is_object()) out.bmc.options = json::object();
          out.bmc.options["ca_file"] = s;
        } else {
          errors.push_back({pointer("redfish_verify_ca"), "must be a boolean or an absolute path to a CA bundle"});
        }
      } else {
        errors.push_back({pointer("redfish_verify_ca"), "must be a boolean or an absolute path to a CA bundle"});
      }
    }
    if (out.bmc.address.empty() && errors.empty())
      errors.push_back({pointer("redfish_address"), "required for the redfish driver"});
  } else if (ironic_driver == "ipmi") {
    std::string host = string_member(driver_info, "ipmi_address", errors).value_or("");
    out.bmc.username = string_member(driver_info, "ipmi_username", errors).value_or("");
    std::string port;
    auto p = driver_info.find("ipmi_port");
    if (p != driver_info.end() && !p->is_null()) {
      int64_t n = -1;
      if (p->is_number_integer()) {
        n = p->get<int64_t>();
      } else if (p->is_string()) {
        const std::string s = p->get<std::string>();
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
        if (ec != std::errc() || end != s.data() + s.size()) n = -1;
      }
      if (n < 1 || n > 65535)
        errors.push_back({pointer("ipmi_port"), "must be a port number from 1 to 65535"});
      else
        port = std::to_string(n);
    }
    if (host.empty()) {
      if (errors.empty()) errors.push_back({pointer("ipmi_address"), "required for the ipmi driver"});
    } else if (host.find(':') != std::string::npos) {
      out.bmc.address = port.empty() ? host : "[" + host + "]:" + port;
    } else {
      out.bmc.address = port.empty() ? host : host + ":" + port;
    }
  } else {
    // fake-hardware: nothing reaches a machine.
    out.bmc.address = fake_hardware_address(bmc_before);
    out.bmc.username.clear();
  }
  return out;
}

json driver_info_view(const Node& node) {
  const std::string driver = ironic_driver_of(node);
  json stored = json::object();
  if (node.ironic.is_object()) {
    auto it = node.ironic.find("driver_info");
    if (it != node.ironic.end() && it->is_object()) stored = *it;
  }
  const BmcInfo& b = node.bmc;
  const BmcInfo from_stored = mapped_bmc(driver, stored, b);
  const bool same = from_stored.address == b.address && from_stored.username == b.username &&
                    (driver != "redfish" || (from_stored.system_id == b.system_id && from_stored.verify_tls == b.verify_tls));
  if (!same) {
    // Changed since (through /v1), or enrolled there: the BMC block is the truth.
    if (driver == "redfish") {
      stored["redfish_address"] = b.address;
      if (!b.username.empty()) stored["redfish_username"] = b.username; else stored.erase("redfish_username");
      if (!b.system_id.empty()) stored["redfish_system_id"] = b.system_id; else stored.erase("redfish_system_id");
      stored["redfish_verify_ca"] = b.verify_tls;
    } else if (driver == "ipmi") {
      auto [host, port] = split_host_port(b.address);
      stored["ipmi_address"] = host;
      if (!port.empty()) stored["ipmi_port"] = port; else stored.erase("ipmi_port");
      if (!b.username.empty()) stored["ipmi_username"] = b.username; else stored.erase("ipmi_username");
    }
  }
  const std::string_view pw_key = password_key(driver);
  if (!pw_key.empty() && !b.password_sealed.empty()) stored[std::string(pw_key)] = kMaskedSecret;
  return stored;
}

std::string driver_info_field(std::string_view ironic_driver, std::string_view bmc_field) {
  const std::string prefix = ironic_driver == "redfish" ? "redfish_" : ironic_driver == "ipmi" ? "ipmi_" : "";
  if (prefix.empty() || !bmc_field.starts_with("/bmc")) return std::string(bmc_field);
  std::string_view rest = bmc_field.substr(4);
  if (rest == "/address") return "/driver_info/" + prefix + "address";
  if (rest == "/username") return "/driver_info/" + prefix + "username";
  if (rest == "/password") return "/driver_info/" + prefix + "password";
  if (rest == "/system_id") return "/driver_info/redfish_system_id";
  if (rest == "/verify_tls" || rest == "/options/ca_file") return "/driver_info/redfish_verify_ca";
  if (rest.empty()) return "/driver_info";
  return "/driver_info" + std::string(rest);
}

}  // namespace kiln::ironic
