#include "drivers/redfish/inventory_parts.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <cstdio>
#include <set>

#include "drivers/redfish/props.h"

namespace kiln::redfish {

namespace {

// Values BMCs write where they mean "unknown".
bool placeholder(const std::string& s) {
  const std::string l = lower(s);
  return l.empty() || l == "n/a" || l == "na" || l == "unknown" || l == "not available" ||
         l == "not specified" || l == "none" || l == "null" || l == "0";
}

std::string known(std::string s) { return placeholder(s) ? std::string() : s; }

nlohmann::json opt(const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

bool unknown_vendor(std::string_view id) {
  auto v = parse_pci_id(id);
  return !v || *v == 0 || *v == 0xffff;
}

constexpr uint32_t kNvidia = 0x10de;
constexpr uint32_t kMellanox = 0x15b3;

bool bluefield_device_id(const PcieFunctionInfo& f) {
  auto vendor = parse_pci_id(f.vendor_id);
  auto device = parse_pci_id(f.device_id);
  if (!vendor || *vendor != kMellanox || !device) return false;
  // The ConnectX inside BlueField-1, -2 and -3.
  return *device == 0xa2d2 || *device == 0xa2d6 || *device == 0xa2dc;
}

}  // namespace

const char* to_string(PcieClass c) {
  switch (c) {
    case PcieClass::kGpu: return "gpu";
    case PcieClass::kDpu: return "dpu";
    case PcieClass::kNic: return "nic";
    case PcieClass::kStorage: return "storage";
    case PcieClass::kOther: return "other";
  }
  return "other";
}

std::optional<uint32_t> parse_pci_id(std::string_view id) {
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.front()))) id.remove_prefix(1);
  while (!id.empty() && std::isspace(static_cast<unsigned char>(id.back()))) id.remove_suffix(1);
  bool hex = false;
  if (id.size() > 2 && id[0] == '0' && (id[1] == 'x' || id[1] == 'X')) {
    id.remove_prefix(2);
    hex = true;
  }
  if (id.empty() || id.size() > 8) return std::nullopt;
  const bool all_decimal = std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!hex && !all_decimal) hex = true;
  uint64_t v = 0;
  for (char c : id) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (hex && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (hex && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return std::nullopt;
    v = v * (hex ? 16 : 10) + static_cast<uint64_t>(d);
  }
  if (v > 0xffff) return std::nullopt;  // vendor and device ids are 16 bits
  return static_cast<uint32_t>(v);
}

bool is_nvidia_vendor(std::string_view id) {
  auto v = parse_pci_id(id);
  return v && *v == kNvidia;
}

bool looks_like_dpu(std::string_view text) {
  const std::string l = lower(std::string(text));
  if (contains(l, "bluefield")) return true;
  // "DPU" as a word, not inside another one.
  for (std::size_t p = l.find("dpu"); p != std::string::npos; p = l.find("dpu", p + 1)) {
    const bool left = p == 0 || !std::isalpha(static_cast<unsigned char>(l[p - 1]));
    const bool right = p + 3 >= l.size() || !std::isalpha(static_cast<unsigned char>(l[p + 3]));
    if (left && right) return true;
  }
  return false;
}

PcieFunctionInfo pcie_function(const nlohmann::json& function, const std::string& uri,
                               std::vector<std::string>& warnings) {
  Props p(function, uri, warnings);
  return PcieFunctionInfo{p.str("DeviceClass"), p.str("VendorId"), p.str("DeviceId")};
}

PcieClass classify_pcie(const nlohmann::json& device, const std::vector<PcieFunctionInfo>& functions) {
  std::vector<std::string> ignored;  // the entry's own reader reports bad properties
  Props p(device, "", ignored);
  const std::string id = p.str("Id"), name = p.str("Name"), model = p.str("Model"),
                    maker = p.str("Manufacturer"), description = p.str("Description");
  const std::string words = lower(id + " " + name + " " + model + " " + maker + " " + description);
  const bool says_gpu = contains(words, "gpu") || contains(words, "nvidia");
  if (looks_like_dpu(name + " " + model + " " + description)) return PcieClass::kDpu;
  for (const auto& f : functions) {
    if (bluefield_device_id(f)) return PcieClass::kDpu;
  }
  for (const auto& f : functions) {
    // HGX baseboards leave DeviceClass out of their GPUs' functions; NVIDIA
    // also makes the NVSwitches there, so then the device must say "GPU".
    if (f.device_class.empty() && is_nvidia_vendor(f.vendor_id) && contains(words, "gpu")) return PcieClass::kGpu;
    if (f.device_class != "DisplayController" && f.device_class != "ProcessingAccelerators") continue;
    if (is_nvidia_vendor(f.vendor_id)) return PcieClass::kGpu;
    if (unknown_vendor(f.vendor_id) && says_gpu) return PcieClass::kGpu;
  }
  for (const auto& f : functions) {
    if (f.device_class == "NetworkController") return PcieClass::kNic;
    if (f.device_class == "MassStorageController") return PcieClass::kStorage;
  }
  if (!functions.empty()) return PcieClass::kOther;
  // No functions to go by: the device's own words.
  const std::string own = lower(id + " " + name + " " + description);
  if (contains(own, "gpu")) return PcieClass::kGpu;
  if (contains(own, "nic") || contains(own, "network") || contains(own, "ethernet")) return PcieClass::kNic;
  if (contains(own, "nvme") || contains(own, "raid") || contains(own, "storage")) return PcieClass::kStorage;
  return PcieClass::kOther;
}

nlohmann::json cpu_entry(const nlohmann::json& processor, const std::string& uri,
                         std::vector<std::string>& warnings) {
  Props p(processor, uri, warnings);
  return nlohmann::json{{"id", p.str("Id")},
                        {"model", p.str("Model")},
                        {"cores", opt(p.integer("TotalCores"))},
                        {"threads", opt(p.integer("TotalThreads"))},
                        {"arch", p.str("ProcessorArchitecture")},
                        {"redfish_uri", uri}};
}

std::string normalise_mac(std::string_view mac) {
  std::string hex;
  for (char c : mac) {
    if (std::isxdigit(static_cast<unsigned char>(c))) {
      hex += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (c != ':' && c != '-' && c != '.' && c != ' ') {
      return {};
    }
  }
  if (hex.size() != 12 || hex == "000000000000") return {};
  std::string out;
  for (std::size_t i = 0; i < 12; i += 2) {
    if (i) out += ':';
    out += hex.substr(i, 2);
  }
  return out;
}

nlohmann::json nic_entry(const nlohmann::json& e, const std::string& uri, std::vector<std::string>& warnings) {
  Props p(e, uri, warnings);
  std::string mac = normalise_mac(p.str("MACAddress"));
  if (mac.empty()) mac = normalise_mac(p.str("PermanentMACAddress"));
  if (mac.empty()) return nullptr;
  return nlohmann::json{{"name", p.str("Name")},
                        {"id", p.str("Id")},
                        {"mac", mac},
                        {"speed_mbps", opt(p.integer("SpeedMbps"))},
                        {"link", p.str("LinkStatus")},
                        {"source", "ethernet_interface"},
                        {"redfish_uri", uri}};
}

nlohmann::json drive_entry(const nlohmann::json& d, const std::string& uri, std::vector<std::string>& warnings) {
  Props p(d, uri, warnings);
  const std::string media = p.str("MediaType");
  nlohmann::json rotational = nullptr;
  if (media == "HDD") rotational = true;
  if (media == "SSD") rotational = false;
  return nlohmann::json{{"name", p.str("Name")},
                        {"model", known(p.str("Model"))},
                        {"serial", known(p.str("SerialNumber"))},
                        {"size_bytes", opt(p.integer("CapacityBytes"))},
                        {"rotational", rotational},
                        {"protocol", p.str("Protocol")},
                        {"redfish_uri", uri}};
}

nlohmann::json pcie_entry(const nlohmann::json& d, const std::string& uri, PcieClass c,
                          const std::vector<PcieFunctionInfo>& functions, std::vector<std::string>& warnings) {
  Props p(d, uri, warnings);
  nlohmann::json e{{"id", p.str("Id")},
                   {"name", p.str("Name")},
                   {"model", known(p.str("Model"))},
                   {"manufacturer", known(p.str("Manufacturer"))},
                   {"serial", known(p.str("SerialNumber"))},
                   {"firmware", known(p.str("FirmwareVersion"))},
                   {"class", to_string(c)},
                   {"vendor_id", nullptr},
                   {"device_id", nullptr},
                   {"redfish_uri", uri}};
  for (const auto& f : functions) {
    auto v = parse_pci_id(f.vendor_id);
    auto dev = parse_pci_id(f.device_id);
    if (!v || *v == 0) continue;
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04x", *v);
    e["vendor_id"] = buf;
    if (dev) {
      std::snprintf(buf, sizeof buf, "%04x", *dev);
      e["device_id"] = buf;
    }
    break;
  }
  return e;
}

std::vector<std::string> macs_of(const nlohmann::json& f, const std::string& uri, std::vector<std::string>& warnings) {
  Props p(f, uri, warnings);
  std::vector<std::string> raw = {p.str("Ethernet.MACAddress"), p.str("Ethernet.PermanentMACAddress")};
  for (auto& m : p.strings("Ethernet.AssociatedMACAddresses")) raw.push_back(std::move(m));
  for (auto& m : p.strings("AssociatedNetworkAddresses")) raw.push_back(std::move(m));
  std::vector<std::string> out;
  for (const auto& r : raw) {
    std::string m = normalise_mac(r);
    if (!m.empty() && std::find(out.begin(), out.end(), m) == out.end()) out.push_back(std::move(m));
  }
  return out;
}

nlohmann::json adapter_entry(const nlohmann::json& a, const std::string& uri, const std::vector<std::string>& macs,
                             std::vector<std::string>& warnings) {
  Props p(a, uri, warnings);
  const std::string name = p.str("Name"), model = known(p.str("Model"));
  // Firmware sits on the adapter's controllers, not the adapter.
  std::string firmware;
  auto controllers = a.is_object() ? a.find("Controllers") : a.end();
  if (a.is_object() && controllers != a.end() && controllers->is_array() && !controllers->empty()) {
    Props c((*controllers)[0], uri + "#/Controllers/0", warnings);
    firmware = known(c.str("FirmwarePackageVersion"));
  }
  return nlohmann::json{{"id", p.str("Id")},
                        {"name", name},
                        {"model", model},
                        {"manufacturer", known(p.str("Manufacturer"))},
                        {"serial", known(p.str("SerialNumber"))},
                        {"firmware", firmware},
                        {"macs", macs},
                        {"dpu", looks_like_dpu(name + " " + model + " " + p.str("Description"))},
                        {"source", "network_adapter"},
                        {"redfish_uri", uri}};
}

namespace {

// The fields a Processor and a PCIeDevice name alike.
GpuSighting sighting_of(Props& p, const char* source) {
  GpuSighting g;
  g.source = source;
  g.uri = p.uri();
  g.id = p.str("Id");
  g.name = p.str("Name");
  g.model = known(p.str("Model"));
  g.vendor = known(p.str("Manufacturer"));
  g.serial = known(p.str("SerialNumber"));
  g.uuid = lower(known(p.str("UUID")));
  g.firmware = known(p.str("FirmwareVersion"));
  g.part_number = known(p.str("PartNumber"));
  return g;
}

}  // namespace

GpuSighting gpu_from_processor(const nlohmann::json& processor, const std::string& uri,
                               std::optional<int64_t> memory_mib, std::vector<std::string>& warnings) {
  Props p(processor, uri, warnings);
  GpuSighting g = sighting_of(p, "processor");
  if (g.vendor.empty() && is_nvidia_vendor(p.str("ProcessorId.VendorId"))) g.vendor = "NVIDIA";
  g.memory_mib = p.integer("MemorySummary.TotalMemorySizeMiB");
  if (!g.memory_mib || *g.memory_mib <= 0) g.memory_mib = memory_mib;
  g.pcie_device = p.link("Links.PCIeDevice");
  g.chassis = p.link("Links.Chassis");
  return g;
}

GpuSighting gpu_from_pcie(const nlohmann::json& device, const std::string& uri, const std::string& chassis,
                          const std::vector<PcieFunctionInfo>& functions, std::vector<std::string>& warnings) {
  Props p(device, uri, warnings);
  GpuSighting g = sighting_of(p, "pcie");
  // Lenovo leaves Model "N/A" and names the card ("NVIDIA L40"); a Name that
  // repeats the Id or is the schema's generic "PCIe Device" is not a model.
  if (g.model.empty() && !g.name.empty() && g.name != g.id && lower(g.name).rfind("pcie", 0) != 0) {
    g.model = g.name;
  }
  if (g.vendor.empty()) {
    for (const auto& f : functions) {
      if (is_nvidia_vendor(f.vendor_id)) g.vendor = "NVIDIA";
    }
  }
  g.pcie_device = uri;
  g.chassis = chassis;
  return g;
}

namespace {

struct UnionFind {
  std::vector<std::size_t> parent;
  explicit UnionFind(std::size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  std::size_t find(std::size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  void join(std::size_t a, std::size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

// Joins every pair of sightings whose key(s) is equal and non-empty.
template <typename Key>
void join_by(const std::vector<GpuSighting>& s, UnionFind& uf, Key key) {
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::string k = key(s[i]);
    if (k.empty()) continue;
    auto [it, fresh] = first.emplace(k, i);
    if (!fresh) uf.join(it->second, i);
  }
}

nlohmann::json merged_entry(const std::vector<const GpuSighting*>& group) {
  auto pick = [&](auto field) {
    for (const GpuSighting* g : group) {
      if (!(g->*field).empty()) return g->*field;
    }
    return std::string();
  };
  std::optional<int64_t> memory;
  nlohmann::json sources = nlohmann::json::array(), found_at = nlohmann::json::array();
  for (const GpuSighting* g : group) {
    if (!memory && g->memory_mib && *g->memory_mib > 0) memory = g->memory_mib;
    if (std::find(sources.begin(), sources.end(), g->source) == sources.end()) sources.push_back(g->source);
    found_at.push_back(g->uri);
  }
  std::string name = pick(&GpuSighting::id);
  if (name.empty()) name = pick(&GpuSighting::name);
  return nlohmann::json{{"name", name},
                        {"model", pick(&GpuSighting::model)},
                        {"vendor", pick(&GpuSighting::vendor)},
                        {"serial", pick(&GpuSighting::serial)},
                        {"uuid", pick(&GpuSighting::uuid)},
                        {"firmware", pick(&GpuSighting::firmware)},
                        {"part_number", pick(&GpuSighting::part_number)},
                        {"memory_mib", opt(memory)},
                        {"source", sources.empty() ? nlohmann::json("") : sources[0]},
                        {"sources", sources},
                        {"found_at", found_at}};
}

}  // namespace

nlohmann::json merge_gpus(const std::vector<GpuSighting>& in, std::vector<std::string>& warnings) {
  // Processors first, so merged fields prefer what the GPU's own board says.
  std::vector<GpuSighting> s;
  for (const auto& g : in) if (g.source == "processor") s.push_back(g);
  for (const auto& g : in) if (g.source != "processor") s.push_back(g);

  UnionFind uf(s.size());
  join_by(s, uf, [](const GpuSighting& g) { return g.serial; });
  join_by(s, uf, [](const GpuSighting& g) { return g.uuid; });
  join_by(s, uf, [](const GpuSighting& g) { return g.pcie_device; });
  // A chassis is a GPU's own (HGX_GPU_SXM_n) when it holds at most one GPU of
  // each source; Lenovo links all eight to Chassis/1, which says nothing.
  std::map<std::string, std::map<std::string, int>> per_chassis;
  for (const auto& g : s) if (!g.chassis.empty()) per_chassis[g.chassis][g.source]++;
  join_by(s, uf, [&](const GpuSighting& g) {
    if (g.chassis.empty()) return std::string();
    for (const auto& [source, n] : per_chassis[g.chassis]) {
      if (n > 1) return std::string();
    }
    return g.chassis;
  });

  std::map<std::size_t, std::vector<const GpuSighting*>> groups;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto& grp = groups[uf.find(i)];
    if (grp.empty()) order.push_back(uf.find(i));
    grp.push_back(&s[i]);
  }
  nlohmann::json identified = nlohmann::json::array();
  std::vector<const std::vector<const GpuSighting*>*> anonymous;
  for (std::size_t root : order) {
    const auto& grp = groups[root];
    const bool anon = grp.size() == 1 && grp[0]->source == "pcie" && grp[0]->serial.empty() && grp[0]->uuid.empty();
    if (anon) anonymous.push_back(&grp);
    else identified.push_back(merged_entry(grp));
  }
  const std::size_t known_count = identified.size();
  if (anonymous.size() > known_count) {
    if (known_count > 0) {
      warnings.push_back(std::to_string(anonymous.size()) + " GPUs on PCIe without a serial number or UUID, " +
                         std::to_string(known_count) + " identified elsewhere: counted " +
                         std::to_string(anonymous.size()));
    }
    for (std::size_t i = known_count; i < anonymous.size(); ++i) identified.push_back(merged_entry(*anonymous[i]));
  }
  return identified;
}

nlohmann::json count_parts(const nlohmann::json& inv) {
  auto size_of = [&](const char* key) -> int64_t {
    if (!inv.is_object()) return 0;
    auto it = inv.find(key);
    return it != inv.end() && it->is_array() ? static_cast<int64_t>(it->size()) : 0;
  };
  nlohmann::json models = nlohmann::json::object();
  if (inv.is_object() && inv.contains("gpus") && inv["gpus"].is_array()) {
    for (const auto& g : inv["gpus"]) {
      std::string m = g.is_object() && g.contains("model") && g["model"].is_string() ? g["model"].get<std::string>()
                                                                                     : std::string();
      if (m.empty()) m = "unknown";
      models[m] = models.value(m, 0) + 1;
    }
  }
  int64_t cpus = 0, cores = 0, memory = 0;
  if (inv.is_object() && inv.contains("cpus") && inv["cpus"].is_object()) {
    const auto& c = inv["cpus"];
    if (c.contains("count") && c["count"].is_number_integer()) cpus = c["count"].get<int64_t>();
    if (c.contains("cores") && c["cores"].is_number_integer()) cores = c["cores"].get<int64_t>();
  }
  if (inv.is_object() && inv.contains("memory_mib") && inv["memory_mib"].is_number_integer()) {
    memory = inv["memory_mib"].get<int64_t>();
  }
  return nlohmann::json{{"cpus", cpus},
                        {"cpu_cores", cores},
                        {"gpus", size_of("gpus")},
                        {"gpu_models", models},
                        {"dpus", size_of("dpus")},
                        {"nics", size_of("nics")},
                        {"network_adapters", size_of("network_adapters")},
                        {"disks", size_of("disks")},
                        {"pcie_devices", size_of("pcie_devices")},
                        {"memory_mib", memory}};
}

}  // namespace kiln::redfish

namespace kiln::redfish {

const char* to_string(SystemRole r) {
  switch (r) {
    case SystemRole::kGpuBaseboard: return "gpu_baseboard";
    case SystemRole::kDpu: return "dpu";
    case SystemRole::kOtherHost: return "other_host";
  }
  return "other_host";
}

bool looks_like_baseboard(const nlohmann::json& system) {
  std::vector<std::string> ignored;
  Props p(system, "", ignored);
  for (const char* key : {"Id", "Name"}) {
    const std::string v = lower(p.str(key));
    for (const char* word : {"baseboard", "hgx", "ubb", "dpu", "bluefield", "erot"}) {
      if (v.find(word) != std::string::npos) return true;
    }
  }
  return false;
}

SystemRole classify_system(const nlohmann::json& system) {
  std::vector<std::string> ignored;
  Props p(system, "", ignored);
  if (p.str("SystemType") == "DPU" || looks_like_dpu(p.str("Id") + " " + p.str("Name") + " " + p.str("Model"))) {
    return SystemRole::kDpu;
  }
  if (looks_like_baseboard(system)) return SystemRole::kGpuBaseboard;
  // A system that can be booted is a host of its own (a blade of a multi-node
  // enclosure); a baseboard has nothing to boot.
  const bool bootable = system.is_object() && system.contains("Boot") && system["Boot"].is_object();
  return bootable ? SystemRole::kOtherHost : SystemRole::kGpuBaseboard;
}

nlohmann::json dpu_from_system(const nlohmann::json& system, const std::string& uri,
                               std::vector<std::string>& warnings) {
  Props p(system, uri, warnings);
  std::string name = p.str("Name");
  if (name.empty()) name = p.str("Id");
  return nlohmann::json{{"name", name},
                        {"model", known(p.str("Model"))},
                        {"serial", known(p.str("SerialNumber"))},
                        {"firmware", known(p.str("BiosVersion"))},
                        {"macs", nlohmann::json::array()},
                        {"source", "system"},
                        {"found_at", {uri}}};
}

namespace {
std::string field(const nlohmann::json& e, const char* key) {
  if (!e.is_object()) return {};
  auto it = e.find(key);
  return it != e.end() && it->is_string() ? it->get<std::string>() : std::string();
}
}  // namespace

nlohmann::json dpu_from_pcie(const nlohmann::json& e) {
  std::string model = field(e, "model");
  if (model.empty()) model = field(e, "name");
  return nlohmann::json{{"name", field(e, "name")}, {"model", model},
                        {"serial", field(e, "serial")}, {"firmware", field(e, "firmware")},
                        {"macs", nlohmann::json::array()}, {"source", "pcie"},
                        {"found_at", {field(e, "redfish_uri")}}};
}

nlohmann::json dpu_from_adapter(const nlohmann::json& e) {
  std::string model = field(e, "model");
  if (model.empty()) model = field(e, "name");
  nlohmann::json macs = e.is_object() && e.contains("macs") && e["macs"].is_array() ? e["macs"] : nlohmann::json::array();
  return nlohmann::json{{"name", field(e, "name")}, {"model", model},
                        {"serial", field(e, "serial")}, {"firmware", field(e, "firmware")},
                        {"macs", macs}, {"source", "network_adapter"},
                        {"found_at", {field(e, "redfish_uri")}}};
}

nlohmann::json merge_dpus(const nlohmann::json& dpus) {
  nlohmann::json out = nlohmann::json::array();
  if (!dpus.is_array()) return out;
  std::map<std::string, std::size_t> by_serial;
  for (const auto& d : dpus) {
    const std::string serial = field(d, "serial");
    auto it = serial.empty() ? by_serial.end() : by_serial.find(serial);
    if (it == by_serial.end()) {
      if (!serial.empty()) by_serial[serial] = out.size();
      out.push_back(d);
      continue;
    }
    nlohmann::json& m = out[it->second];
    for (const char* key : {"model", "firmware", "name"}) {
      if (field(m, key).empty() && !field(d, key).empty()) m[key] = d[key];
    }
    for (const char* key : {"macs", "found_at"}) {
      if (!d.contains(key) || !d[key].is_array()) continue;
      for (const auto& v : d[key]) {
        if (std::find(m[key].begin(), m[key].end(), v) == m[key].end()) m[key].push_back(v);
      }
    }
  }
  return out;
}

}  // namespace kiln::redfish
