#include "drivers/redfish/inventory.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace kiln::redfish {

namespace {

std::string str(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

nlohmann::json num(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? *it : nlohmann::json();
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool absent(const nlohmann::json& resource) {
  auto st = resource.find("Status");
  return st != resource.end() && st->is_object() && st->value("State", std::string()) == "Absent";
}

bool fatal(const Error& e) {
  return e.code == Code::kTimeout || e.code == Code::kUnauthenticated || e.code == Code::kUnavailable;
}

nlohmann::json system_json(const HostSystem& s) {
  return nlohmann::json{{"manufacturer", str(s.resource, "Manufacturer")},
                        {"product", str(s.resource, "Model")},
                        {"serial", str(s.resource, "SerialNumber")},
                        {"uuid", str(s.resource, "UUID")},
                        {"sku", str(s.resource, "SKU")},
                        {"redfish_uri", s.uri}};
}

nlohmann::json finish(const HostSystem& s, const std::vector<nlohmann::json>& cpus,
                      int64_t memory_mib, const nlohmann::json& disks, const nlohmann::json& nics,
                      const nlohmann::json& gpus, const nlohmann::json& pcie,
                      const std::string& bmc_firmware, const std::vector<std::string>& warnings) {
  int64_t cores = 0, threads = 0;
  std::string model;
  nlohmann::json items = nlohmann::json::array();
  for (const auto& c : cpus) {
    if (c["cores"].is_number()) cores += c["cores"].get<int64_t>();
    if (c["threads"].is_number()) threads += c["threads"].get<int64_t>();
    if (model.empty()) model = c["model"].get<std::string>();
    items.push_back(c);
  }
  int64_t count = static_cast<int64_t>(cpus.size());
  if (count == 0) {
    // No Processors collection: fall back to the summary.
    auto ps = s.resource.find("ProcessorSummary");
    if (ps != s.resource.end() && ps->is_object()) {
      count = ps->value("Count", 0);
      cores = ps->value("CoreCount", 0);
      model = ps->value("Model", std::string());
    }
  }
  if (memory_mib == 0) {
    auto ms = s.resource.find("MemorySummary");
    if (ms != s.resource.end() && ms->is_object() && (*ms)["TotalSystemMemoryGiB"].is_number()) {
      memory_mib = static_cast<int64_t>((*ms)["TotalSystemMemoryGiB"].get<double>() * 1024);
    }
  }
  return nlohmann::json{
      {"source", "redfish"},
      {"system", system_json(s)},
      {"firmware", {{"bios", str(s.resource, "BiosVersion")}, {"bmc", bmc_firmware}}},
      {"cpus", {{"count", count}, {"cores", cores}, {"threads", threads}, {"model", model}, {"items", items}}},
      {"memory_mib", memory_mib},
      {"disks", disks},
      {"nics", nics},
      {"gpus", gpus},
      {"pcie_devices", pcie},
      {"warnings", warnings},
  };
}

}  // namespace

const char* to_string(PcieClass c) {
  switch (c) {
    case PcieClass::kGpu: return "gpu";
    case PcieClass::kNic: return "nic";
    case PcieClass::kStorage: return "storage";
    case PcieClass::kOther: return "other";
  }
  return "other";
}

std::optional<PcieClass> classify_pcie_by_name(const nlohmann::json& device) {
  const std::string text = lower(str(device, "Id") + " " + str(device, "Name") + " " +
                                 str(device, "Description"));
  if (text.find("gpu") != std::string::npos) return PcieClass::kGpu;
  if (text.find("nic") != std::string::npos || text.find("network") != std::string::npos ||
      text.find("ethernet") != std::string::npos) {
    return PcieClass::kNic;
  }
  if (text.find("nvme") != std::string::npos || text.find("raid") != std::string::npos ||
      text.find("storage") != std::string::npos) {
    return PcieClass::kStorage;
  }
  return std::nullopt;
}

PcieClass classify_pcie_by_functions(const std::vector<nlohmann::json>& functions) {
  for (const auto& f : functions) {
    const std::string cls = str(f, "DeviceClass");
    if (cls == "DisplayController" || cls == "ProcessingAccelerators") return PcieClass::kGpu;
  }
  for (const auto& f : functions) {
    const std::string cls = str(f, "DeviceClass");
    if (cls == "NetworkController") return PcieClass::kNic;
    if (cls == "MassStorageController") return PcieClass::kStorage;
  }
  return PcieClass::kOther;
}

nlohmann::json cpu_entry(const nlohmann::json& p) {
  return nlohmann::json{{"id", str(p, "Id")},
                        {"model", str(p, "Model")},
                        {"cores", num(p, "TotalCores")},
                        {"threads", num(p, "TotalThreads")},
                        {"arch", str(p, "ProcessorArchitecture")}};
}

nlohmann::json gpu_from_processor(const nlohmann::json& p) {
  return nlohmann::json{{"name", str(p, "Name")},
                        {"model", str(p, "Model")},
                        {"vendor", str(p, "Manufacturer")},
                        {"serial", str(p, "SerialNumber")},
                        {"firmware", str(p, "FirmwareVersion")},
                        {"source", "processor"}};
}

nlohmann::json gpu_from_pcie(const nlohmann::json& d) {
  std::string vendor = str(d, "Manufacturer");
  auto oem = d.find("Oem");
  if (oem != d.end() && oem->is_object()) {
    for (const auto& v : oem->items()) {
      if (v.value().is_object() && vendor.empty()) vendor = v.value().value("GPUVendor", std::string());
    }
  }
  return nlohmann::json{{"name", str(d, "Name")},
                        {"model", str(d, "Model")},
                        {"vendor", vendor},
                        {"serial", str(d, "SerialNumber")},
                        {"firmware", str(d, "FirmwareVersion")},
                        {"source", "pcie"}};
}

nlohmann::json nic_entry(const nlohmann::json& e) {
  std::string mac = str(e, "MACAddress");
  if (mac.empty()) mac = str(e, "PermanentMACAddress");
  if (mac.empty()) return nullptr;
  return nlohmann::json{{"name", str(e, "Name")},
                        {"id", str(e, "Id")},
                        {"mac", lower(mac)},
                        {"speed_mbps", num(e, "SpeedMbps")},
                        {"link", str(e, "LinkStatus")}};
}

nlohmann::json drive_entry(const nlohmann::json& d) {
  const std::string media = str(d, "MediaType");
  nlohmann::json rotational = nullptr;
  if (media == "HDD") rotational = true;
  if (media == "SSD") rotational = false;
  return nlohmann::json{{"name", str(d, "Name")},
                        {"model", str(d, "Model")},
                        {"serial", str(d, "SerialNumber")},
                        {"size_bytes", num(d, "CapacityBytes")},
                        {"rotational", rotational},
                        {"protocol", str(d, "Protocol")}};
}

nlohmann::json pcie_entry(const nlohmann::json& d, PcieClass c) {
  return nlohmann::json{{"id", str(d, "Id")},
                        {"name", str(d, "Name")},
                        {"model", str(d, "Model")},
                        {"manufacturer", str(d, "Manufacturer")},
                        {"serial", str(d, "SerialNumber")},
                        {"firmware", str(d, "FirmwareVersion")},
                        {"class", to_string(c)}};
}

nlohmann::json merge_gpus(const nlohmann::json& from_processors, const nlohmann::json& from_pcie) {
  nlohmann::json out = from_processors.is_array() ? from_processors : nlohmann::json::array();
  std::set<std::string> serials;
  for (const auto& g : out) {
    const std::string s = str(g, "serial");
    if (!s.empty()) serials.insert(s);
  }
  if (!from_pcie.is_array()) return out;
  const bool have_processor_gpus = !out.empty();
  for (const auto& g : from_pcie) {
    const std::string s = str(g, "serial");
    if (s.empty() ? have_processor_gpus : serials.count(s) > 0) continue;
    if (!s.empty()) serials.insert(s);
    out.push_back(g);
  }
  return out;
}

namespace {

// Reads one resource. A non-fatal failure (one resource missing or refused)
// becomes a warning and nullopt, so inspection reports what it could read; a
// fatal one (auth, transport, deadline) is returned as the error.
asio::awaitable<Result<std::optional<nlohmann::json>>> fetch(RedfishClient& client, const std::string& uri,
                                                             Deadline deadline,
                                                             std::vector<std::string>& warnings) {
  Result<RfResponse> r = co_await client.get(uri, deadline);
  if (r) co_return std::optional<nlohmann::json>(std::move(r->body));
  if (fatal(r.error())) co_return r.take_error();
  warnings.push_back(r.error().message);
  co_return std::optional<nlohmann::json>();
}

// Reads every member of `collection` (nothing when the link is empty), with
// the same warning/error split as fetch().
asio::awaitable<Result<std::vector<nlohmann::json>>> fetch_members(RedfishClient& client,
                                                                   const std::string& collection,
                                                                   Deadline deadline,
                                                                   std::vector<std::string>& warnings) {
  std::vector<nlohmann::json> out;
  if (collection.empty()) co_return out;
  Result<std::vector<std::string>> uris = co_await client.members(collection, deadline);
  if (!uris) {
    if (fatal(uris.error())) co_return uris.take_error();
    warnings.push_back(uris.error().message);
    co_return out;
  }
  for (const std::string& uri : *uris) {
    Result<std::optional<nlohmann::json>> m = co_await fetch(client, uri, deadline, warnings);
    if (!m) co_return m.take_error();
    if (*m) out.push_back(std::move(**m));
  }
  co_return out;
}

}  // namespace

asio::awaitable<Result<nlohmann::json>> collect_inventory(RedfishClient& client, HostSystem system,
                                                          Deadline deadline) {
  std::vector<std::string> warnings;
  std::vector<nlohmann::json> cpus;
  nlohmann::json proc_gpus = nlohmann::json::array();
  nlohmann::json pcie_gpus = nlohmann::json::array();
  nlohmann::json disks = nlohmann::json::array();
  nlohmann::json nics = nlohmann::json::array();
  nlohmann::json pcie = nlohmann::json::array();
  int64_t memory_mib = 0;
  std::string bmc_firmware;
  const nlohmann::json& sys = system.resource;

  // Each collection is read by fetch_members() and then walked in a plain
  // loop (no callbacks into coroutines: GCC 12, docs/coroutines.md).
  const std::string processors = link_of(sys, "Processors");
  Result<std::vector<nlohmann::json>> procs = co_await fetch_members(client, processors, deadline, warnings);
  if (!procs) co_return procs.take_error();
  for (const nlohmann::json& p : *procs) {
    if (absent(p)) continue;
    const std::string type = str(p, "ProcessorType");
    if (type == "GPU") {
      proc_gpus.push_back(gpu_from_processor(p));
    } else if (type == "CPU" || type.empty()) {
      cpus.push_back(cpu_entry(p));
    }
  }

  const std::string memory = link_of(sys, "Memory");
  Result<std::vector<nlohmann::json>> dimms = co_await fetch_members(client, memory, deadline, warnings);
  if (!dimms) co_return dimms.take_error();
  for (const nlohmann::json& m : *dimms) {
    if (absent(m)) continue;
    nlohmann::json cap = num(m, "CapacityMiB");
    if (cap.is_number()) memory_mib += cap.get<int64_t>();
  }

  const std::string storage = link_of(sys, "Storage");
  Result<std::vector<nlohmann::json>> controllers = co_await fetch_members(client, storage, deadline, warnings);
  if (!controllers) co_return controllers.take_error();
  for (const nlohmann::json& st : *controllers) {
    const std::vector<std::string> drives = links_of(st, "Drives");
    for (const std::string& d : drives) {
      Result<std::optional<nlohmann::json>> dr = co_await fetch(client, d, deadline, warnings);
      if (!dr) co_return dr.take_error();
      if (*dr && !absent(**dr)) disks.push_back(drive_entry(**dr));
    }
  }

  const std::string simple = disks.empty() ? link_of(sys, "SimpleStorage") : std::string();
  Result<std::vector<nlohmann::json>> simples = co_await fetch_members(client, simple, deadline, warnings);
  if (!simples) co_return simples.take_error();
  for (const nlohmann::json& st : *simples) {
    auto devs = st.find("Devices");
    if (devs == st.end() || !devs->is_array()) continue;
    for (const auto& d : *devs) {
      if (!absent(d)) disks.push_back(drive_entry(d));
    }
  }

  const std::string ethernet = link_of(sys, "EthernetInterfaces");
  Result<std::vector<nlohmann::json>> ifaces = co_await fetch_members(client, ethernet, deadline, warnings);
  if (!ifaces) co_return ifaces.take_error();
  for (const nlohmann::json& e : *ifaces) {
    nlohmann::json nic = nic_entry(e);
    if (!nic.is_null()) nics.push_back(std::move(nic));
  }

  // PCIe devices: the system's own links, then each linked chassis' collection.
  std::vector<std::string> devices = links_of(sys, "PCIeDevices");
  const std::vector<std::string> chassis = links_of(sys, "Links", "Chassis");
  for (const auto& ch : chassis) {
    Result<std::optional<nlohmann::json>> c = co_await fetch(client, ch, deadline, warnings);
    if (!c) co_return c.take_error();
    if (!*c) continue;
    const std::string coll = link_of(**c, "PCIeDevices");
    if (coll.empty()) continue;
    auto uris = co_await client.members(coll, deadline);
    if (!uris) {
      if (fatal(uris.error())) co_return uris.take_error();
      warnings.push_back(uris.error().message);
      continue;
    }
    for (const auto& u : *uris) {
      if (std::find(devices.begin(), devices.end(), u) == devices.end()) devices.push_back(u);
    }
  }
  for (const auto& uri : devices) {
    Result<std::optional<nlohmann::json>> fetched = co_await fetch(client, uri, deadline, warnings);
    if (!fetched) co_return fetched.take_error();
    if (!*fetched || absent(**fetched)) continue;
    const nlohmann::json& device = **fetched;
    std::optional<PcieClass> cls = classify_pcie_by_name(device);
    if (!cls) {
      std::vector<nlohmann::json> functions;
      const std::string fcoll = link_of(device, "PCIeFunctions");
      if (!fcoll.empty()) {
        auto furis = co_await client.members(fcoll, deadline);
        if (furis) {
          for (const auto& fu : *furis) {
            auto f = co_await client.get(fu, deadline);
            if (f) functions.push_back(std::move(f->body));
            else if (fatal(f.error())) co_return f.take_error();
          }
        } else if (fatal(furis.error())) {
          co_return furis.take_error();
        }
      }
      cls = classify_pcie_by_functions(functions);
    }
    pcie.push_back(pcie_entry(device, *cls));
    if (*cls == PcieClass::kGpu) pcie_gpus.push_back(gpu_from_pcie(device));
  }

  // BMC firmware: the manager that manages this system.
  const std::vector<std::string> managers = links_of(sys, "Links", "ManagedBy");
  if (!managers.empty()) {
    auto m = co_await client.get(managers.front(), deadline);
    if (m) bmc_firmware = str(m->body, "FirmwareVersion");
    else if (fatal(m.error())) co_return m.take_error();
    else warnings.push_back(m.error().message);
  }

  nlohmann::json gpus = merge_gpus(proc_gpus, pcie_gpus);
  co_return finish(system, cpus, memory_mib, disks, nics, gpus, pcie, bmc_firmware, warnings);
}

}  // namespace kiln::redfish
