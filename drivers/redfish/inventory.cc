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

  // One plain loop per collection rather than a shared helper coroutine taking
  // callbacks: easier to read and no lambda-coroutine captures (GCC 12).
  const std::string processors = link_of(sys, "Processors");
  if (!processors.empty()) {
    auto uris = co_await client.members(processors, deadline);
    if (!uris) {
      if (fatal(uris.error())) co_return uris.take_error();
      warnings.push_back(uris.error().message);
    } else {
      for (const auto& uri : *uris) {
        auto p = co_await client.get(uri, deadline);
        if (!p) {
          if (fatal(p.error())) co_return p.take_error();
          warnings.push_back(p.error().message);
          continue;
        }
        if (absent(p->body)) continue;
        const std::string type = str(p->body, "ProcessorType");
        if (type == "GPU") {
          proc_gpus.push_back(gpu_from_processor(p->body));
        } else if (type == "CPU" || type.empty()) {
          cpus.push_back(cpu_entry(p->body));
        }
      }
    }
  }

  const std::string memory = link_of(sys, "Memory");
  if (!memory.empty()) {
    auto uris = co_await client.members(memory, deadline);
    if (!uris) {
      if (fatal(uris.error())) co_return uris.take_error();
      warnings.push_back(uris.error().message);
    } else {
      for (const auto& uri : *uris) {
        auto m = co_await client.get(uri, deadline);
        if (!m) {
          if (fatal(m.error())) co_return m.take_error();
          warnings.push_back(m.error().message);
          continue;
        }
        if (absent(m->body)) continue;
        nlohmann::json cap = num(m->body, "CapacityMiB");
        if (cap.is_number()) memory_mib += cap.get<int64_t>();
      }
    }
  }

  const std::string storage = link_of(sys, "Storage");
  if (!storage.empty()) {
    auto uris = co_await client.members(storage, deadline);
    if (!uris) {
      if (fatal(uris.error())) co_return uris.take_error();
      warnings.push_back(uris.error().message);
    } else {
      for (const auto& uri : *uris) {
        auto st = co_await client.get(uri, deadline);
        if (!st) {
          if (fatal(st.error())) co_return st.take_error();
          warnings.push_back(st.error().message);
          continue;
        }
        const std::vector<std::string> drives = links_of(st->body, "Drives");
        for (const auto& d : drives) {
          auto dr = co_await client.get(d, deadline);
          if (!dr) {
            if (fatal(dr.error())) co_return dr.take_error();
            warnings.push_back(dr.error().message);
            continue;
          }
          if (!absent(dr->body)) disks.push_back(drive_entry(dr->body));
        }
      }
    }
  }

  const std::string simple = link_of(sys, "SimpleStorage");
  if (!simple.empty() && disks.empty()) {
    auto uris = co_await client.members(simple, deadline);
    if (!uris) {
      if (fatal(uris.error())) co_return uris.take_error();
      warnings.push_back(uris.error().message);
    } else {
      for (const auto& uri : *uris) {
        auto st = co_await client.get(uri, deadline);
        if (!st) {
          if (fatal(st.error())) co_return st.take_error();
          warnings.push_back(st.error().message);
          continue;
        }
        auto devs = st->body.find("Devices");
        if (devs == st->body.end() || !devs->is_array()) continue;
        for (const auto& d : *devs) {
          if (!absent(d)) disks.push_back(drive_entry(d));
        }
      }
    }
  }

  const std::string ethernet = link_of(sys, "EthernetInterfaces");
  if (!ethernet.empty()) {
    auto uris = co_await client.members(ethernet, deadline);
    if (!uris) {
      if (fatal(uris.error())) co_return uris.take_error();
      warnings.push_back(uris.error().message);
    } else {
      for (const auto& uri : *uris) {
        auto e = co_await client.get(uri, deadline);
        if (!e) {
          if (fatal(e.error())) co_return e.take_error();
          warnings.push_back(e.error().message);
          continue;
        }
        nlohmann::json nic = nic_entry(e->body);
        if (!nic.is_null()) nics.push_back(std::move(nic));
      }
    }
  }

  // PCIe devices: the system's own links, then each linked chassis' collection.
  std::vector<std::string> devices = links_of(sys, "PCIeDevices");
  const std::vector<std::string> chassis = links_of(sys, "Links", "Chassis");
  for (const auto& ch : chassis) {
    auto c = co_await client.get(ch, deadline);
    if (!c) {
      if (fatal(c.error())) co_return c.take_error();
      warnings.push_back(c.error().message);
      continue;
    }
    const std::string coll = link_of(c->body, "PCIeDevices");
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
    auto d = co_await client.get(uri, deadline);
    if (!d) {
      if (fatal(d.error())) co_return d.take_error();
      warnings.push_back(d.error().message);
      continue;
    }
    if (absent(d->body)) continue;
    std::optional<PcieClass> cls = classify_pcie_by_name(d->body);
    if (!cls) {
      std::vector<nlohmann::json> functions;
      const std::string fcoll = link_of(d->body, "PCIeFunctions");
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
    pcie.push_back(pcie_entry(d->body, *cls));
    if (*cls == PcieClass::kGpu) pcie_gpus.push_back(gpu_from_pcie(d->body));
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
