#include "drivers/redfish/inventory.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "drivers/redfish/props.h"

namespace kiln::redfish {

namespace {

using nlohmann::json;

bool fatal(const Error& e) {
  return e.code == Code::kTimeout || e.code == Code::kUnauthenticated || e.code == Code::kUnavailable;
}

// "/redfish/v1/Chassis/X/" and "/redfish/v1/Chassis/X" are one resource.
std::string canonical(std::string uri) {
  while (uri.size() > 1 && uri.back() == '/') uri.pop_back();
  return uri;
}

struct Member {
  std::string uri;
  json body;
};

// Everything one inspection has read so far. Filled by the steps below, in
// order; finish() turns it into the inventory JSON.
struct Walk {
  HostSystem host;
  std::vector<Member> baseboards;
  std::vector<Member> chassis;  // the machine's
  json systems = json::array();
  std::vector<json> cpus;
  int64_t memory_mib = 0;
  json disks = json::array();
  json nics = json::array();
  json adapters = json::array();
  json pcie = json::array();
  json dpus = json::array();
  std::vector<GpuSighting> gpus;
  std::string bmc_firmware;
  std::vector<std::string> warnings;
};

// One resource. A failure of this resource alone (4xx, 5xx, not a JSON
// object) is a warning and nullopt; a fatal one is the error.
asio::awaitable<Result<std::optional<json>>> fetch(RedfishClient& client, std::string uri, Deadline deadline,
                                                   std::vector<std::string>& warnings) {
  Result<RfResponse> r = co_await client.get(uri, deadline);
  if (r) co_return std::optional<json>(std::move(r->body));
  if (fatal(r.error())) co_return r.take_error();
  warnings.push_back("skipped: " + r.error().message);
  co_return std::optional<json>();
}

// Every member of `collection` that could be read ("" reads nothing).
asio::awaitable<Result<std::vector<Member>>> fetch_members(RedfishClient& client, std::string collection,
                                                           Deadline deadline, std::vector<std::string>& warnings) {
  std::vector<Member> out;
  if (collection.empty()) co_return out;
  Result<std::vector<std::string>> uris = co_await client.members(collection, deadline);
  if (!uris) {
    if (fatal(uris.error())) co_return uris.take_error();
    warnings.push_back("skipped: " + uris.error().message);
    co_return out;
  }
  for (const std::string& uri : *uris) {
    Result<std::optional<json>> m = co_await fetch(client, uri, deadline, warnings);
    if (!m) co_return m.take_error();
    if (*m) out.push_back(Member{uri, std::move(**m)});
  }
  co_return out;
}

// Each of `uris` that could be read.
asio::awaitable<Result<std::vector<Member>>> fetch_all(RedfishClient& client, std::vector<std::string> uris,
                                                       Deadline deadline, std::vector<std::string>& warnings) {
  std::vector<Member> out;
  for (const std::string& uri : uris) {
    Result<std::optional<json>> m = co_await fetch(client, uri, deadline, warnings);
    if (!m) co_return m.take_error();
    if (*m) out.push_back(Member{uri, std::move(**m)});
  }
  co_return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::vector<std::string> canonical_links(const json& j, const char* key, const char* key2) {
  std::vector<std::string> out;
  for (auto& l : links_of(j, key, key2)) out.push_back(canonical(l));
  return out;
}

json system_row(const std::string& uri, const char* role) { return json{{"redfish_uri", uri}, {"role", role}}; }

// Step 1: the other ComputerSystems and the machine's chassis (inventory.h).
asio::awaitable<Status> find_machine(RedfishClient& client, Walk& w, Deadline deadline) {
  const std::string host = canonical(w.host.uri);
  w.systems.push_back(system_row(w.host.uri, "host"));
  Result<json> root = co_await client.service_root(deadline);
  if (!root) co_return root.take_error();

  std::vector<std::string> candidates;
  const std::string systems = link_of(*root, "Systems");
  if (!systems.empty()) {
    Result<std::vector<std::string>> uris = co_await client.members(systems, deadline);
    if (!uris && fatal(uris.error())) co_return uris.take_error();
    if (!uris) w.warnings.push_back("skipped: " + uris.error().message);
    if (uris) for (const auto& u : *uris) candidates.push_back(canonical(u));
  }

  std::vector<Member> all_chassis;
  const std::string chassis = link_of(*root, "Chassis");
  if (!chassis.empty()) {
    Result<std::vector<Member>> c = co_await fetch_members(client, chassis, deadline, w.warnings);
    if (!c) co_return c.take_error();
    all_chassis = std::move(*c);
  }
  // Chassis the host links to that the collection did not list.
  std::vector<std::string> listed;
  for (const auto& c : all_chassis) listed.push_back(canonical(c.uri));
  std::vector<std::string> extra;
  for (const auto& l : canonical_links(w.host.resource, "Links", "Chassis")) {
    if (!contains(listed, l)) extra.push_back(l);
  }
  Result<std::vector<Member>> more = co_await fetch_all(client, extra, deadline, w.warnings);
  if (!more) co_return more.take_error();
  for (auto& m : *more) all_chassis.push_back(std::move(m));

  for (const auto& c : all_chassis) {
    for (const auto& s : canonical_links(c.body, "Links", "ComputerSystems")) {
      if (!contains(candidates, s)) candidates.push_back(s);
    }
  }

  std::vector<std::string> machine = {host};
  for (const std::string& uri : candidates) {
    if (uri == host) continue;
    Result<std::optional<json>> s = co_await fetch(client, uri, deadline, w.warnings);
    if (!s) co_return s.take_error();
    if (!*s) continue;
    const SystemRole role = classify_system(**s);
    w.systems.push_back(system_row(uri, to_string(role)));
    if (role == SystemRole::kDpu) {
      w.dpus.push_back(dpu_from_system(**s, uri, w.warnings));
    } else if (role == SystemRole::kOtherHost) {
      w.warnings.push_back(uri + " looks like another host (it can be booted): its parts are not counted");
    } else {
      machine.push_back(uri);
      w.baseboards.push_back(Member{uri, std::move(**s)});
    }
  }

  // The machine's chassis: linked from its systems, or linking to them.
  std::vector<std::string> linked = canonical_links(w.host.resource, "Links", "Chassis");
  for (const auto& b : w.baseboards) {
    for (auto& l : canonical_links(b.body, "Links", "Chassis")) linked.push_back(l);
  }
  for (auto& c : all_chassis) {
    bool mine = contains(linked, canonical(c.uri));
    for (const auto& s : canonical_links(c.body, "Links", "ComputerSystems")) mine = mine || contains(machine, s);
    if (mine) w.chassis.push_back(std::move(c));
  }
  co_return ok_status();
}

// The GPU memory a processor's Links.Memory adds up to.
asio::awaitable<Result<std::optional<int64_t>>> gpu_memory(RedfishClient& client, const json& processor,
                                                           Deadline deadline, std::vector<std::string>& warnings) {
  std::optional<int64_t> total;
  Result<std::vector<Member>> mem =
      co_await fetch_all(client, links_of(processor, "Links", "Memory"), deadline, warnings);
  if (!mem) co_return mem.take_error();
  for (const auto& m : *mem) {
    Props p(m.body, m.uri, warnings);
    std::optional<int64_t> mib = p.integer("CapacityMiB");
    if (mib && *mib > 0) total = total.value_or(0) + *mib;
  }
  co_return total;
}

// Step 2: Processors of a system: GPUs always, CPUs of the host only.
asio::awaitable<Status> read_processors(RedfishClient& client, Walk& w, const json& system, bool host,
                                        Deadline deadline) {
  Result<std::vector<Member>> procs =
      co_await fetch_members(client, link_of(system, "Processors"), deadline, w.warnings);
  if (!procs) co_return procs.take_error();
  for (const Member& m : *procs) {
    std::vector<std::string> ignored;
    Props p(m.body, m.uri, ignored);
    if (p.absent()) continue;
    const std::string type = p.str("ProcessorType");
    if (type == "GPU") {
      Result<std::optional<int64_t>> mib = co_await gpu_memory(client, m.body, deadline, w.warnings);
      if (!mib) co_return mib.take_error();
      w.gpus.push_back(gpu_from_processor(m.body, m.uri, *mib, w.warnings));
    } else if (host && (type == "CPU" || type.empty())) {
      w.cpus.push_back(cpu_entry(m.body, m.uri, w.warnings));
    }
  }
  co_return ok_status();
}

// Step 3: the host's DIMMs, drives and Ethernet interfaces.
asio::awaitable<Status> read_host_parts(RedfishClient& client, Walk& w, Deadline deadline) {
  const json& sys = w.host.resource;
  Result<std::vector<Member>> dimms = co_await fetch_members(client, link_of(sys, "Memory"), deadline, w.warnings);
  if (!dimms) co_return dimms.take_error();
  for (const Member& m : *dimms) {
    Props p(m.body, m.uri, w.warnings);
    if (p.absent()) continue;
    std::optional<int64_t> mib = p.integer("CapacityMiB");
    if (mib && *mib > 0) w.memory_mib += *mib;
  }

  Result<std::vector<Member>> controllers =
      co_await fetch_members(client, link_of(sys, "Storage"), deadline, w.warnings);
  if (!controllers) co_return controllers.take_error();
  for (const Member& st : *controllers) {
    Result<std::vector<Member>> drives = co_await fetch_all(client, links_of(st.body, "Drives"), deadline, w.warnings);
    if (!drives) co_return drives.take_error();
    for (const Member& d : *drives) {
      std::vector<std::string> ignored;
      Props p(d.body, d.uri, ignored);
      if (!p.absent()) w.disks.push_back(drive_entry(d.body, d.uri, w.warnings));
    }
  }
  const std::string simple = w.disks.empty() ? link_of(sys, "SimpleStorage") : std::string();
  Result<std::vector<Member>> simples = co_await fetch_members(client, simple, deadline, w.warnings);
  if (!simples) co_return simples.take_error();
  for (const Member& st : *simples) {
    if (!st.body.contains("Devices") || !st.body["Devices"].is_array()) continue;
    for (std::size_t i = 0; i < st.body["Devices"].size(); ++i) {
      const json& d = st.body["Devices"][i];
      std::vector<std::string> ignored;
      Props p(d, st.uri, ignored);
      if (!p.absent()) w.disks.push_back(drive_entry(d, st.uri + "#/Devices/" + std::to_string(i), w.warnings));
    }
  }

  Result<std::vector<Member>> ifaces =
      co_await fetch_members(client, link_of(sys, "EthernetInterfaces"), deadline, w.warnings);
  if (!ifaces) co_return ifaces.take_error();
  for (const Member& e : *ifaces) {
    json nic = nic_entry(e.body, e.uri, w.warnings);
    if (!nic.is_null()) w.nics.push_back(std::move(nic));
  }
  co_return ok_status();
}

// The functions of a PCIe device: its PCIeFunctions collection, or the
// Links.PCIeFunctions array of older schemas.
asio::awaitable<Result<std::vector<PcieFunctionInfo>>> pcie_functions(RedfishClient& client, const Member& device,
                                                                      Deadline deadline,
                                                                      std::vector<std::string>& warnings) {
  std::vector<PcieFunctionInfo> out;
  std::vector<Member> fns;
  const std::string coll = link_of(device.body, "PCIeFunctions");
  if (!coll.empty()) {
    Result<std::vector<Member>> r = co_await fetch_members(client, coll, deadline, warnings);
    if (!r) co_return r.take_error();
    fns = std::move(*r);
  } else {
    Result<std::vector<Member>> r =
        co_await fetch_all(client, links_of(device.body, "Links", "PCIeFunctions"), deadline, warnings);
    if (!r) co_return r.take_error();
    fns = std::move(*r);
  }
  for (const Member& f : fns) out.push_back(pcie_function(f.body, f.uri, warnings));
  co_return out;
}

// PCIe device URIs, each once, with the chassis that listed it ("" when a
// system's PCIeDevices links did).
struct DeviceList {
  std::vector<std::string> uris, listed_by, seen;
  void add(const std::string& u, const std::string& chassis) {
    if (contains(seen, canonical(u))) return;
    seen.push_back(canonical(u));
    uris.push_back(u);
    listed_by.push_back(chassis);
  }
};

// Step 4: PCIe devices of the machine's systems and chassis.
asio::awaitable<Status> read_pcie(RedfishClient& client, Walk& w, Deadline deadline) {
  DeviceList list;
  for (const auto& u : links_of(w.host.resource, "PCIeDevices")) list.add(u, "");
  for (const auto& b : w.baseboards) {
    for (const auto& u : links_of(b.body, "PCIeDevices")) list.add(u, "");
  }
  for (const Member& c : w.chassis) {
    const std::string coll = link_of(c.body, "PCIeDevices");
    if (coll.empty()) continue;
    Result<std::vector<std::string>> members = co_await client.members(coll, deadline);
    if (!members && fatal(members.error())) co_return members.take_error();
    if (!members) w.warnings.push_back("skipped: " + members.error().message);
    if (members) for (const auto& u : *members) list.add(u, canonical(c.uri));
  }
  const std::vector<std::string>& uris = list.uris;
  for (std::size_t i = 0; i < uris.size(); ++i) {
    Result<std::optional<json>> d = co_await fetch(client, uris[i], deadline, w.warnings);
    if (!d) co_return d.take_error();
    if (!*d) continue;
    Member device{uris[i], std::move(**d)};
    std::vector<std::string> ignored;
    Props p(device.body, device.uri, ignored);
    if (p.absent()) continue;
    Result<std::vector<PcieFunctionInfo>> fns = co_await pcie_functions(client, device, deadline, w.warnings);
    if (!fns) co_return fns.take_error();
    const PcieClass cls = classify_pcie(device.body, *fns);
    json entry = pcie_entry(device.body, device.uri, cls, *fns, w.warnings);
    if (cls == PcieClass::kGpu) w.gpus.push_back(gpu_from_pcie(device.body, device.uri, list.listed_by[i], *fns, w.warnings));
    if (cls == PcieClass::kDpu) w.dpus.push_back(dpu_from_pcie(entry));
    w.pcie.push_back(std::move(entry));
  }
  co_return ok_status();
}

// Step 5: network adapters of the machine's chassis, with their MACs.
asio::awaitable<Status> read_adapters(RedfishClient& client, Walk& w, Deadline deadline) {
  for (const Member& c : w.chassis) {
    Result<std::vector<Member>> adapters =
        co_await fetch_members(client, link_of(c.body, "NetworkAdapters"), deadline, w.warnings);
    if (!adapters) co_return adapters.take_error();
    for (const Member& a : *adapters) {
      std::vector<std::string> macs;
      for (const char* coll : {"NetworkDeviceFunctions", "Ports"}) {
        Result<std::vector<Member>> parts = co_await fetch_members(client, link_of(a.body, coll), deadline, w.warnings);
        if (!parts) co_return parts.take_error();
        for (const Member& f : *parts) {
          for (auto& m : macs_of(f.body, f.uri, w.warnings)) {
            if (!contains(macs, m)) macs.push_back(std::move(m));
          }
        }
      }
      json entry = adapter_entry(a.body, a.uri, macs, w.warnings);
      if (entry["dpu"].get<bool>()) w.dpus.push_back(dpu_from_adapter(entry));
      w.adapters.push_back(std::move(entry));
    }
  }
  co_return ok_status();
}

// Step 6: the firmware of the BMC that manages the host.
asio::awaitable<Status> read_bmc(RedfishClient& client, Walk& w, Deadline deadline) {
  const std::vector<std::string> managers = links_of(w.host.resource, "Links", "ManagedBy");
  if (managers.empty()) co_return ok_status();
  Result<std::optional<json>> m = co_await fetch(client, managers.front(), deadline, w.warnings);
  if (!m) co_return m.take_error();
  if (*m) {
    Props p(**m, managers.front(), w.warnings);
    w.bmc_firmware = p.str("FirmwareVersion");
  }
  co_return ok_status();
}

// MACs of network adapters that no Ethernet interface of the host listed.
void add_adapter_macs(Walk& w) {
  std::set<std::string> have;
  for (const auto& n : w.nics) have.insert(n["mac"].get<std::string>());
  for (const auto& a : w.adapters) {
    for (const auto& m : a["macs"]) {
      if (!have.insert(m.get<std::string>()).second) continue;
      w.nics.push_back(json{{"name", a["name"]}, {"id", a["id"]}, {"mac", m}, {"speed_mbps", nullptr},
                            {"link", ""}, {"source", "network_adapter"}, {"redfish_uri", a["redfish_uri"]}});
    }
  }
}

json finish(Walk& w) {
  Props sys(w.host.resource, w.host.uri, w.warnings);
  int64_t cores = 0, threads = 0;
  std::string model;
  json items = json::array();
  for (const auto& c : w.cpus) {
    if (c["cores"].is_number_integer()) cores += c["cores"].get<int64_t>();
    if (c["threads"].is_number_integer()) threads += c["threads"].get<int64_t>();
    if (model.empty()) model = c["model"].get<std::string>();
    items.push_back(c);
  }
  int64_t count = static_cast<int64_t>(w.cpus.size());
  if (count == 0) {
    // No Processors collection: fall back to the summary.
    count = sys.integer("ProcessorSummary.Count").value_or(0);
    cores = sys.integer("ProcessorSummary.CoreCount").value_or(0);
    model = sys.str("ProcessorSummary.Model");
  }
  if (w.memory_mib == 0) {
    if (auto gib = sys.number("MemorySummary.TotalSystemMemoryGiB")) w.memory_mib = static_cast<int64_t>(*gib * 1024);
  }
  add_adapter_macs(w);
  json gpus = merge_gpus(w.gpus, w.warnings);
  json inv{{"source", "redfish"},
           {"system",
            {{"manufacturer", sys.str("Manufacturer")},
             {"product", sys.str("Model")},
             {"serial", sys.str("SerialNumber")},
             {"uuid", sys.str("UUID")},
             {"sku", sys.str("SKU")},
             {"redfish_uri", w.host.uri}}},
           {"firmware", {{"bios", sys.str("BiosVersion")}, {"bmc", w.bmc_firmware}}},
           {"cpus", {{"count", count}, {"cores", cores}, {"threads", threads}, {"model", model}, {"items", items}}},
           {"memory_mib", w.memory_mib},
           {"disks", w.disks},
           {"nics", w.nics},
           {"network_adapters", w.adapters},
           {"gpus", gpus},
           {"dpus", merge_dpus(w.dpus)},
           {"pcie_devices", w.pcie},
           {"systems", w.systems}};
  sys.flush();
  inv["counts"] = count_parts(inv);
  inv["warnings"] = w.warnings;
  return inv;
}

}  // namespace

asio::awaitable<Result<nlohmann::json>> collect_inventory(RedfishClient& client, HostSystem system,
                                                          Deadline deadline) {
  Walk w;
  w.host = std::move(system);
  Status s = co_await find_machine(client, w, deadline);
  if (!s) co_return s.take_error();
  s = co_await read_processors(client, w, w.host.resource, true, deadline);
  if (!s) co_return s.take_error();
  for (std::size_t i = 0; i < w.baseboards.size(); ++i) {
    s = co_await read_processors(client, w, w.baseboards[i].body, false, deadline);
    if (!s) co_return s.take_error();
  }
  s = co_await read_host_parts(client, w, deadline);
  if (!s) co_return s.take_error();
  s = co_await read_pcie(client, w, deadline);
  if (!s) co_return s.take_error();
  s = co_await read_adapters(client, w, deadline);
  if (!s) co_return s.take_error();
  s = co_await read_bmc(client, w, deadline);
  if (!s) co_return s.take_error();
  co_return finish(w);
}

}  // namespace kiln::redfish
