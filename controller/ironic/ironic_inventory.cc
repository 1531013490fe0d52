#include "controller/ironic/ironic_inventory.h"

#include <cctype>
#include <string>
#include <string_view>

namespace kiln::ironic {
namespace {

using nlohmann::json;

// Typed reads of the stored document: null when absent or of another type.
const json& member(const json& o, std::string_view key) {
  static const json null_value;
  if (!o.is_object()) return null_value;
  auto it = o.find(std::string(key));
  return it == o.end() ? null_value : *it;
}
json str(const json& o, std::string_view key) {
  const json& v = member(o, key);
  return v.is_string() ? v : json();
}
json integer(const json& o, std::string_view key) {
  const json& v = member(o, key);
  return v.is_number_integer() ? v : json();
}
json boolean(const json& o, std::string_view key) {
  const json& v = member(o, key);
  return v.is_boolean() ? v : json();
}
const json& object(const json& o, std::string_view key) {
  static const json empty = json::object();
  const json& v = member(o, key);
  return v.is_object() ? v : empty;
}
const json& array(const json& o, std::string_view key) {
  static const json empty = json::array();
  const json& v = member(o, key);
  return v.is_array() ? v : empty;
}
// The first member of `keys` that is a string.
json first_str(const json& o, std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys)
    if (json v = str(o, k); !v.is_null()) return v;
  return json();
}

// Ironic's memory.physical_mb from bytes or MiB.
json mib(const json& bytes, const json& mebibytes) {
  if (bytes.is_number_integer() && bytes.get<int64_t>() >= 0) return bytes.get<int64_t>() / (1024 * 1024);
  if (mebibytes.is_number_integer() && mebibytes.get<int64_t>() >= 0) return mebibytes;
  return json();
}

json interfaces(const json& inv) {
  json out = json::array();
  for (const json& nic : array(inv, "nics")) {
    if (out.size() >= kMaxInventoryItems) break;
    if (!nic.is_object()) continue;
    json carrier = boolean(nic, "carrier");
    if (carrier.is_null()) {
      // Redfish says LinkStatus ("LinkUp").
      if (json link = str(nic, "link"); link.is_string()) carrier = link.get<std::string>() == "LinkUp";
    }
    out.push_back({{"name", first_str(nic, {"name", "id"})},
                   {"mac_address", str(nic, "mac")},
                   {"ipv4_address", json()},
                   {"ipv6_address", json()},
                   {"has_carrier", carrier.is_null() ? json(false) : carrier},
                   {"lldp", json()},
                   {"vendor", str(nic, "vendor")},
                   {"product", str(nic, "product")},
                   {"client_id", json()},
                   {"biosdevname", json()},
                   {"speed_mbps", integer(nic, "speed_mbps")}});
  }
  return out;
}

json cpu(const json& inv) {
  const json& agent = object(inv, "cpu");
  const json& bmc = object(inv, "cpus");
  json count = integer(agent, "threads");
  if (count.is_null()) count = integer(bmc, "threads");
  if (count.is_null()) count = integer(bmc, "cores");
  json sockets = integer(agent, "sockets");
  if (sockets.is_null()) sockets = integer(bmc, "count");
  json arch = str(agent, "architecture");
  if (arch.is_null()) {
    // Redfish lists each processor's arch.
    for (const json& item : array(bmc, "items"))
      if (json a = str(item, "arch"); !a.is_null()) { arch = a; break; }
  }
  json flags = json::array();
  for (const json& f : array(agent, "flags")) {
    if (flags.size() >= kMaxInventoryItems) break;
    if (f.is_string()) flags.push_back(f);
  }
  json model = str(agent, "model");
  if (model.is_null()) model = str(bmc, "model");
  return {{"model_name", model},  {"frequency", json()},        {"count", count},
          {"architecture", arch}, {"flags", std::move(flags)},  {"socket_count", sockets}};
}

json memory(const json& inv) {
  const json& agent = object(inv, "memory");
  json total = integer(agent, "total_bytes");
  json physical = mib(integer(agent, "physical_bytes"), integer(inv, "memory_mib"));
  if (physical.is_null()) physical = mib(total, json());
  if (total.is_null()) {
    if (json m = integer(inv, "memory_mib"); m.is_number_integer() && m.get<int64_t>() >= 0)
      total = m.get<int64_t>() * 1024 * 1024;
  }
  return {{"total", total}, {"physical_mb", physical}};
}

json disks(const json& inv) {
  json out = json::array();
  for (const json& d : array(inv, "disks")) {
    if (out.size() >= kMaxInventoryItems) break;
    if (!d.is_object()) continue;
    json name = str(d, "path");
    if (name.is_null()) {
      if (json n = str(d, "name"); n.is_string()) {
        const std::string s = n.get<std::string>();
        name = s.rfind("/dev/", 0) == 0 ? s : "/dev/" + s;
      }
    }
    json wwn = str(d, "wwn");
    if (wwn.is_string() && wwn.get<std::string>().empty()) wwn = json();
    out.push_back({{"name", name},
                   {"model", str(d, "model")},
                   {"size", integer(d, "size_bytes")},
                   {"rotational", boolean(d, "rotational")},
                   {"wwn", wwn},
                   {"serial", str(d, "serial")},
                   {"vendor", str(d, "vendor")},
                   {"wwn_with_extension", wwn},
                   {"wwn_vendor_extension", json()},
                   {"hctl", json()},
                   {"by_path", json()}});
  }
  return out;
}

json system_vendor(const json& inv) {
  const json& dmi = object(inv, "dmi");
  const json& system = object(inv, "system");
  const json& firmware = object(inv, "firmware");
  json product = str(dmi, "product_name");
  if (product.is_null()) product = str(system, "product");
  json serial = str(dmi, "product_serial");
  if (serial.is_null()) serial = str(system, "serial");
  json maker = str(dmi, "sys_vendor");
  if (maker.is_null()) maker = str(system, "manufacturer");
  json bios_version = str(dmi, "bios_version");
  if (bios_version.is_null()) bios_version = str(firmware, "bios");
  return {{"product_name", product},
          {"serial_number", serial},
          {"manufacturer", maker},
          {"firmware", {{"vendor", str(dmi, "bios_vendor")}, {"version", bios_version}, {"build_date", str(dmi, "bios_date")}}}};
}

// The host part of a BMC address ("https://10.0.0.9:8000/x", "10.0.0.9:623",
// "[fd00::9]:623"), as IPA reports the BMC's IP.
std::string bmc_host(std::string address) {
  if (std::size_t scheme = address.find("://"); scheme != std::string::npos) address = address.substr(scheme + 3);
  if (std::size_t slash = address.find('/'); slash != std::string::npos) address.resize(slash);
  if (std::size_t at = address.rfind('@'); at != std::string::npos) address = address.substr(at + 1);
  if (!address.empty() && address.front() == '[') {
    std::size_t close = address.find(']');
    return close == std::string::npos ? std::string() : address.substr(1, close - 1);
  }
  std::size_t colon = address.find(':');
  if (colon != std::string::npos && address.find(':', colon + 1) == std::string::npos) address.resize(colon);
  return address;
}

bool is_ipv6(const std::string& s) { return s.find(':') != std::string::npos; }

}  // namespace

json ironic_inventory(const Node& node) {
  const json& inv = node.inventory;
  json out = json::object();
  out["interfaces"] = interfaces(inv);
  out["cpu"] = cpu(inv);
  out["memory"] = memory(inv);
  out["disks"] = disks(inv);
  out["system_vendor"] = system_vendor(inv);
  // IPA reports 0.0.0.0 / :: when it finds no BMC; Kiln's fake driver has none.
  std::string host = node.bmc.driver == "fake" ? std::string() : bmc_host(node.bmc.address);
  out["bmc_address"] = !host.empty() && !is_ipv6(host) ? host : "0.0.0.0";
  out["bmc_v6address"] = !host.empty() && is_ipv6(host) ? host : "::/0";
  out["bmc_mac"] = json();
  json boot_mode = str(inv, "boot_mode");
  if (boot_mode.is_null()) boot_mode = node.boot_mode;
  json pxe = json();
  for (const Port& p : node.ports)
    if (p.pxe) { pxe = p.address; break; }
  out["boot"] = {{"current_boot_mode", boot_mode}, {"pxe_interface", pxe}};
  out["hostname"] = json();

  // What IPA's shape has no member for, under Kiln's names.
  json plugin = json::object();
  json source = str(inv, "source");
  plugin["source"] = source.is_null() ? json("agent") : source;
  for (std::string_view k : {"gpus", "dpus", "rdma", "numa", "hypervisor", "kernel", "agent_version",
                             "network_adapters", "pcie_devices", "warnings"}) {
    const json& v = member(inv, k);
    if (v.is_null()) continue;
    if (v.is_array() && v.size() > kMaxInventoryItems) continue;
    plugin[std::string(k)] = v;
  }
  return {{"inventory", std::move(out)}, {"plugin_data", std::move(plugin)}};
}

}  // namespace kiln::ironic
