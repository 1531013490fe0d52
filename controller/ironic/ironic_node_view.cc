#include "controller/ironic/ironic_node_view.h"

#include <cstdio>
#include <ctime>

#include "controller/ironic/ironic_driver_info.h"
#include "controller/ironic/ironic_states.h"

namespace kiln::ironic {
namespace {

using nlohmann::json;

// Every node field Ironic's API knows, with the microversion that added it
// (ironic/api/controllers/v1/utils.py VERSIONED_FIELDS; 1.1 for the rest) and
// whether the non-detail list shows it.
struct FieldRow {
  std::string_view name;
  int minor;
  bool in_list;
};

constexpr FieldRow kFields[] = {
    {"uuid", 1, true}, {"name", 5, true}, {"instance_uuid", 1, true}, {"power_state", 1, true},
    {"provision_state", 1, true}, {"maintenance", 1, true},
    {"allocation_uuid", 52, false}, {"automated_clean", 47, false}, {"bios_interface", 40, false},
    {"boot_interface", 31, false}, {"boot_mode", 75, false}, {"chassis_uuid", 1, false},
    {"clean_step", 7, false}, {"conductor", 49, false}, {"conductor_group", 46, false},
    {"console_enabled", 1, false}, {"console_interface", 31, false}, {"created_at", 1, false},
    {"deploy_interface", 31, false}, {"deploy_step", 44, false}, {"description", 51, false},
    {"driver", 1, false}, {"driver_info", 1, false}, {"driver_internal_info", 3, false},
    {"extra", 1, false}, {"fault", 42, false}, {"firmware_interface", 86, false},
    {"inspect_interface", 31, false}, {"inspection_finished_at", 6, false},
    {"inspection_started_at", 6, false}, {"instance_info", 1, false}, {"last_error", 1, false},
    {"lessee", 65, false}, {"maintenance_reason", 1, false}, {"management_interface", 31, false},
    {"network_data", 66, false}, {"network_interface", 20, false}, {"owner", 50, false},
    {"parent_node", 83, false}, {"power_interface", 31, false}, {"properties", 1, false},
    {"protected", 48, false}, {"protected_reason", 48, false}, {"provision_updated_at", 1, false},
    {"raid_config", 12, false}, {"raid_interface", 31, false}, {"rescue_interface", 38, false},
    {"reservation", 1, false}, {"resource_class", 21, false}, {"retired", 61, false},
    {"retired_reason", 61, false}, {"secure_boot", 75, false}, {"service_step", 87, false},
    {"shard", 82, false}, {"storage_interface", 33, false}, {"target_power_state", 1, false},
    {"target_provision_state", 1, false}, {"target_raid_config", 12, false}, {"traits", 37, false},
    {"updated_at", 1, false}, {"vendor_interface", 31, false},
};

const FieldRow* find_field(std::string_view name) {
  for (const FieldRow& f : kFields)
    if (f.name == name) return &f;
  return nullptr;
}

// The Ironic document's member `key` if it has `type`-compatible content.
const json* doc_member(const Node& node, std::string_view key) {
  if (!node.ironic.is_object()) return nullptr;
  auto it = node.ironic.find(std::string(key));
  if (it == node.ironic.end() || it->is_null()) return nullptr;
  return &*it;
}

json doc_object(const Node& node, std::string_view key) {
  const json* v = doc_member(node, key);
  return v != nullptr && v->is_object() ? *v : json::object();
}

bool doc_bool(const Node& node, std::string_view key, bool fallback) {
  const json* v = doc_member(node, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

json opt_string(const std::string& s) { return s.empty() ? json() : json(s); }

// The interfaces a hardware type runs with in Kiln (what Ironic would pick as
// its defaults), overridden by what a client set.
json interface_of(const Node& node, const std::string& driver, std::string_view iface) {
  const std::string key = std::string(iface) + "_interface";
  if (const json* v = doc_member(node, key); v != nullptr && v->is_string()) return *v;
  const bool fake = driver == "fake-hardware";
  if (iface == "power" || iface == "management") return fake ? "fake" : driver;
  if (iface == "boot") return fake ? "fake" : "ipxe";
  if (iface == "deploy") return fake ? "fake" : "direct";
  if (iface == "inspect") return fake ? "fake" : "agent";
  if (iface == "network" || iface == "storage") return "noop";
  if (iface == "firmware") return "no-firmware";
  return "no-" + std::string(iface);  // bios, console, raid, rescue, vendor
}

json link_pair(const std::string& endpoint, const std::string& tail) {
  return json::array({{{"href", endpoint + "/v1/" + tail}, {"rel", "self"}},
                      {{"href", endpoint + "/" + tail}, {"rel", "bookmark"}}});
}

json value_of(const Node& n, std::string_view f, const NodeStates& st, const std::string& driver, ApiVersion v) {
  if (f == "uuid") return n.id;
  if (f == "name") return opt_string(n.name);
  if (f == "instance_uuid") return instance_uuid_of(n);
  if (f == "power_state") return st.power_state ? json(*st.power_state) : json();
  if (f == "provision_state") {
    std::optional<std::string> p = versioned_provision_state(st.provision_state, v.minor);
    return p ? json(*p) : json();
  }
  if (f == "target_provision_state") {
    if (!st.target_provision_state) return json();
    std::optional<std::string> p = versioned_provision_state(*st.target_provision_state, v.minor);
    return p ? json(*p) : json();
  }
  if (f == "target_power_state") return st.target_power_state ? json(*st.target_power_state) : json();
  if (f == "maintenance") return n.maintenance;
  if (f == "maintenance_reason") return opt_string(n.maintenance_reason);
  if (f == "last_error") return opt_string(n.last_error);
  if (f == "fault") return opt_string(n.fault);
  if (f == "reservation") return opt_string(n.reservation);
  if (f == "driver") return driver;
  if (f == "driver_info") return driver_info_view(n);
  if (f == "driver_internal_info" || f == "clean_step" || f == "deploy_step" || f == "service_step" ||
      f == "raid_config" || f == "target_raid_config")
    return json::object();
  if (f == "instance_info") {
    // Ironic hides the config drive (it holds user data and keys) as it
    // hides passwords; a PATCH that sends the mask back keeps the stored one.
    json info = doc_object(n, f);
    if (info.contains("configdrive")) info["configdrive"] = std::string(kMaskedSecret);
    return info;
  }
  if (f == "extra" || f == "properties" || f == "network_data") return doc_object(n, f);
  if (f == "created_at") return ironic_timestamp(n.created_at);
  if (f == "updated_at") return ironic_timestamp(n.updated_at);
  if (f == "provision_updated_at" || f == "inspection_started_at" || f == "inspection_finished_at") {
    const json* t = doc_member(n, f);
    return t != nullptr && t->is_string() ? *t : json();
  }
  if (f == "traits") return n.traits;
  if (f == "owner") return opt_string(n.tenant);
  if (f == "boot_mode") return n.boot_mode == "bios" ? json("bios") : json("uefi");
  if (f == "secure_boot") return json();
  if (f == "console_enabled") return false;
  if (f == "automated_clean") {
    const json* a = doc_member(n, f);
    return a != nullptr && a->is_boolean() ? *a : json();
  }
  if (f == "protected" || f == "retired") return doc_bool(n, f, false);
  if (f == "conductor_group") {
    const json* g = doc_member(n, f);
    return g != nullptr && g->is_string() ? *g : json("");
  }
  if (f == "conductor") return json();
  if (f == "allocation_uuid" || f == "chassis_uuid" || f == "parent_node") return json();
  if (f.ends_with("_interface")) return interface_of(n, driver, f.substr(0, f.size() - 10));
  // description, resource_class, lessee, shard, protected_reason, retired_reason
  return doc_string(n, f);
}

}  // namespace

json ironic_timestamp(int64_t ms) {
  if (ms <= 0) return json();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06d+00:00", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms % 1000) * 1000);
  return std::string(buf);
}

json doc_string(const Node& node, std::string_view key) {
  const json* v = doc_member(node, key);
  return v != nullptr && v->is_string() ? *v : json();
}

json instance_uuid_of(const Node& node) {
  json set = doc_string(node, "instance_uuid");
  if (!set.is_null()) return set;
  return opt_string(node.allocation);
}

json node_view(const Node& node, const NodeViewOptions& o) {
  const NodeStates st = node_states(node);
  const std::string driver = ironic_driver_of(node);
  json out = json::object();
  for (const FieldRow& f : kFields) {
    if (o.version.minor < f.minor) continue;
    if (o.fields ? (!o.fields->contains(std::string(f.name)) && f.name != "uuid") : (!o.detail && !f.in_list))
      continue;
    out[std::string(f.name)] = value_of(node, f.name, st, driver, o.version);
  }
  out["links"] = link_pair(o.endpoint, "nodes/" + node.id);
  if (o.detail && !o.fields) {
    out["ports"] = link_pair(o.endpoint, "nodes/" + node.id + "/ports");
    if (o.version.at_least(14)) out["states"] = link_pair(o.endpoint, "nodes/" + node.id + "/states");
    if (o.version.at_least(24)) out["portgroups"] = link_pair(o.endpoint, "nodes/" + node.id + "/portgroups");
    if (o.version.at_least(32)) out["volume"] = link_pair(o.endpoint, "nodes/" + node.id + "/volume");
  }
  return out;
}

std::variant<std::set<std::string>, FieldsRefusal> parse_node_fields(std::string_view value, ApiVersion version) {
  std::set<std::string> out;
  std::size_t pos = 0;
  while (pos <= value.size()) {
    std::size_t comma = value.find(',', pos);
    std::string f(value.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos));
    while (!f.empty() && f.front() == ' ') f.erase(0, 1);
    while (!f.empty() && f.back() == ' ') f.pop_back();
    const FieldRow* row = find_field(f);
    if (row == nullptr && f != "links")
      return FieldsRefusal{400, "fields: field " + std::string(f.size() > 64 ? f.substr(0, 64) + "..." : f) +
                                    " is not a valid field"};
    if (row != nullptr && version.minor < row->minor)
      return FieldsRefusal{406, "fields: field " + f + " needs API version 1." + std::to_string(row->minor) +
                                    " or later; this request is " + version.str()};
    out.insert(f);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace kiln::ironic
