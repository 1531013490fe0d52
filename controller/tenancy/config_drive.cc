#include "controller/tenancy/config_drive.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "controller/tenancy/iso9660.h"

namespace kiln {
namespace {

// A YAML double-quoted scalar: JSON strings are valid YAML.
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

bool hostname_label(std::string_view l) {
  if (l.empty() || l.size() > 63 || l.front() == '-' || l.back() == '-') return false;
  return std::all_of(l.begin(), l.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

bool valid_hostname(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  std::size_t start = 0;
  for (;;) {
    std::size_t dot = h.find('.', start);
    if (!hostname_label(h.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start)))
      return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// Our cloud-config part: the allocation's keys and the deploy's phone_home.
std::string keys_cloud_config(const std::vector<std::string>& keys, const std::string& phone_home_url) {
  std::string y = "#cloud-config\n";
  y += "ssh_authorized_keys:";
  if (keys.empty()) y += " []";
  y += "\n";
  for (const std::string& k : keys) y += "  - " + quoted(k) + "\n";
  y += phone_home_cloud_config(phone_home_url);
  return y;
}

bool is_mac(std::string_view m) {
  if (m.size() != 17) return false;
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (i % 3 == 2 ? m[i] != ':' : !std::isxdigit(static_cast<unsigned char>(m[i]))) return false;
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != std::tolower(static_cast<unsigned char>(prefix[i])))
      return false;
  return true;
}

// A boundary that no line of `body` starts with.
std::string boundary_for(const std::string& body) {
  for (int n = 0;; ++n) {
    std::string b = "==kiln-config-drive-" + std::to_string(n) + "==";
    if (body.find("--" + b) == std::string::npos) return b;
  }
}

}  // namespace

std::string config_drive_instance_id(const std::string& node_id, const std::string& allocation_id) {
  return allocation_id.empty() ? node_id : node_id + "-" + allocation_id;
}

std::string config_drive_hostname(const std::string& node_name, const std::string& node_id) {
  if (valid_hostname(node_name)) return node_name;
  return "kiln-" + node_id.substr(0, 8);
}

std::string config_drive_meta_data(const ConfigDriveInput& in) {
  return "instance-id: " + quoted(in.instance_id) + "\nlocal-hostname: " + quoted(in.hostname) + "\n";
}

std::string phone_home_cloud_config(const std::string& url) {
  if (url.empty()) return "";
  return "phone_home:\n  url: " + quoted(url) +
         "\n  post: [pub_key_rsa, pub_key_ecdsa, pub_key_ed25519, instance_id, hostname]\n  tries: 10\n";
}

std::string combined_user_data(const std::string& tenant_user_data, const std::string& ours) {
  if (tenant_user_data.empty()) return ours;
  // Ours is merged into whatever the tenant's parts said (above).
  std::string merged = ours;
  const std::size_t first_line = merged.find('\n');
  merged.insert(first_line == std::string::npos ? merged.size() : first_line + 1,
                "merge_how: 'list(append)+dict(no_replace,recurse_list)+str()'\n");
  const std::string b = boundary_for(tenant_user_data + merged);
  std::string m = "Content-Type: multipart/mixed; boundary=\"" + b + "\"\nMIME-Version: 1.0\n\n";
  m += "--" + b + "\n";
  // A MIME message of the tenant's own keeps its headers (a nested part);
  // anything else is text cloud-init types by its first line.
  if (!starts_with_ci(tenant_user_data, "content-type:"))
    m += "Content-Type: text/plain; charset=\"utf-8\"\nContent-Disposition: attachment; filename=\"tenant\"\n\n";
  m += tenant_user_data;
  if (tenant_user_data.back() != '\n') m += "\n";
  m += "--" + b + "\n";
  m += "Content-Type: text/cloud-config; charset=\"utf-8\"\n"
       "Content-Disposition: attachment; filename=\"kiln-ssh-keys\"\n\n";
  m += merged;
  m += "--" + b + "--\n";
  return m;
}

std::string config_drive_user_data(const TenantAccess& access, const std::string& phone_home_url) {
  return combined_user_data(access.user_data, keys_cloud_config(access.ssh_keys, phone_home_url));
}

std::string config_drive_network_config(const std::vector<std::string>& macs) {
  std::string n = "version: 2\nethernets:\n";
  int port = 0;
  for (const std::string& mac : macs) {
    if (!is_mac(mac)) continue;
    n += "  kiln-port-" + std::to_string(port++) + ":\n    match:\n      macaddress: " + quoted(lower(mac)) +
         "\n    dhcp4: true\n";
  }
  if (port > 0) return n;
  return n + "  kiln-dhcp:\n    match:\n      name: \"e*\"\n    dhcp4: true\n    optional: true\n";
}

Result<std::string> build_config_drive(const ConfigDriveInput& in) {
  IsoVolume v;
  v.label = std::string(kConfigDriveLabel);
  v.time = in.time;
  v.files = {{"meta-data", config_drive_meta_data(in)},
             {"user-data", config_drive_user_data(in.access, in.phone_home_url)},
             {"network-config", config_drive_network_config(in.macs)}};
  Result<std::string> iso = build_iso9660(v);
  if (!iso) return iso;
  if (iso->size() > kConfigDriveMaxBytes)
    return Error::invalid("user_data", "makes the config drive larger than " +
                                           std::to_string(kConfigDriveMaxBytes / 1024) + " KiB");
  return iso;
}

}  // namespace kiln
