// What a BMC returns, as inventory reads it (drivers/redfish/inventory_parts.h,
// props.h): the input is parsed as JSON the way the Redfish client does, then
// handed to every part reader as each kind of resource. None may throw (an
// exception escaping here is a crash); MACs come out normalised.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_text.h"
#include "drivers/redfish/inventory_parts.h"
#include "drivers/redfish/props.h"

using kiln::redfish::GpuSighting;
using nlohmann::json;

namespace {

void check_mac(const std::string& m) {
  if (m.empty()) return;
  if (m.size() != 17) __builtin_trap();
  for (std::size_t i = 0; i < m.size(); ++i) {
    const char c = m[i];
    const bool ok = i % 3 == 2 ? c == ':' : ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!ok) __builtin_trap();
  }
}

void one_resource(const json& r, std::vector<GpuSighting>& gpus, json& dpus, std::vector<std::string>& warnings) {
  namespace rf = kiln::redfish;
  {
    rf::Props p(r, "/fuzz", warnings);
    (void)p.str("Status.State");
    (void)p.integer("ProcessorSummary.Count");
    (void)p.number("MemorySummary.TotalSystemMemoryGiB");
    (void)p.boolean("Oem.Nvidia.MIGModeEnabled");
    (void)p.links("Links.Chassis");
    (void)p.link("Links.PCIeDevice");
    (void)p.strings("AssociatedNetworkAddresses");
    (void)p.absent();
  }
  std::vector<rf::PcieFunctionInfo> fns = {rf::pcie_function(r, "/fuzz/f", warnings)};
  const rf::PcieClass cls = rf::classify_pcie(r, fns);
  json pcie = rf::pcie_entry(r, "/fuzz/d", cls, fns, warnings);
  (void)rf::cpu_entry(r, "/fuzz/p", warnings);
  (void)rf::drive_entry(r, "/fuzz/drive", warnings);
  json nic = rf::nic_entry(r, "/fuzz/e", warnings);
  if (!nic.is_null()) check_mac(nic["mac"].get<std::string>());
  std::vector<std::string> macs = rf::macs_of(r, "/fuzz/port", warnings);
  for (const auto& m : macs) check_mac(m);
  json adapter = rf::adapter_entry(r, "/fuzz/a", macs, warnings);
  (void)rf::classify_system(r);
  dpus.push_back(rf::dpu_from_system(r, "/fuzz/s", warnings));
  dpus.push_back(rf::dpu_from_pcie(pcie));
  dpus.push_back(rf::dpu_from_adapter(adapter));
  gpus.push_back(rf::gpu_from_processor(r, "/fuzz/p", std::nullopt, warnings));
  gpus.push_back(rf::gpu_from_pcie(r, "/fuzz/d", "/fuzz", fns, warnings));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kiln::Result<json> doc = kiln::parse_json(text);
  if (!doc) return 0;
  std::vector<GpuSighting> gpus;
  json dpus = json::array();
  std::vector<std::string> warnings;
  one_resource(*doc, gpus, dpus, warnings);
  // A collection's members, each as a resource of its own.
  if (doc->is_object() && doc->contains("Members") && (*doc)["Members"].is_array()) {
    for (const auto& m : (*doc)["Members"]) one_resource(m, gpus, dpus, warnings);
  }
  json merged = kiln::redfish::merge_gpus(gpus, warnings);
  if (!merged.is_array() || merged.size() > gpus.size()) __builtin_trap();
  json d = kiln::redfish::merge_dpus(dpus);
  if (d.size() > dpus.size()) __builtin_trap();
  (void)kiln::redfish::count_parts(*doc);
  (void)kiln::redfish::count_parts(json{{"gpus", merged}, {"dpus", d}});
  (void)kiln::redfish::parse_pci_id(text.substr(0, 16));
  (void)kiln::redfish::normalise_mac(text.substr(0, 32));
  return 0;
}
