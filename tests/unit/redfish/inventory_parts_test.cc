// The pure parts of Redfish inventory (drivers/redfish/props.h,
// inventory_parts.h): tolerant reads, PCIe classification, and merging the
// sightings of one GPU or DPU. The shapes are those of the captured BMC trees
// in tests/fixtures/redfish (Lenovo, HPE, DGX, Supermicro), cut down.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "drivers/redfish/inventory_parts.h"
#include "drivers/redfish/props.h"

using namespace kiln::redfish;
using nlohmann::json;

namespace {

GpuSighting sighting(const std::string& source, const std::string& uri, const std::string& serial,
                     const std::string& chassis = "", const std::string& pcie_device = "") {
  GpuSighting g;
  g.source = source;
  g.uri = uri;
  g.id = uri.substr(uri.rfind('/') + 1);
  g.serial = serial;
  g.chassis = chassis;
  g.pcie_device = source == "pcie" ? uri : pcie_device;
  return g;
}

}  // namespace

TEST_CASE("Props: null and wrongly typed properties are absent, one warning per resource", "[inventory]") {
  std::vector<std::string> warnings;
  json r = {{"Model", nullptr},
            {"TotalCores", "64"},
            {"TotalThreads", "lots"},
            {"SerialNumber", "ILC2280420     "},
            {"Status", {{"State", nullptr}}},
            {"ProcessorSummary", nullptr},
            {"Links", {{"Chassis", {{"@odata.id", "/redfish/v1/Chassis/1"}}}, {"PCIeDevice", 7}}}};
  {
    Props p(r, "/redfish/v1/Systems/1/Processors/1", warnings);
    CHECK(p.str("Model").empty());
    CHECK(p.integer("TotalCores") == 64);  // a decimal string is a number
    CHECK_FALSE(p.integer("TotalThreads"));
    CHECK(p.str("SerialNumber") == "ILC2280420");  // fixed-width padding trimmed
    CHECK_FALSE(p.absent());
    CHECK_FALSE(p.integer("ProcessorSummary.Count"));
    CHECK(p.links("Links.Chassis") == std::vector<std::string>{"/redfish/v1/Chassis/1"});  // one object, not an array
    CHECK(p.link("Links.PCIeDevice").empty());
    CHECK(p.str("NotThere").empty());  // missing is not worth a warning
    CHECK(warnings.empty());           // written once, when the resource is done
  }
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "/redfish/v1/Systems/1/Processors/1: null or wrongly typed: Model, TotalThreads, Status.State, "
        "ProcessorSummary.Count, Links.PCIeDevice; treated as absent");

  std::vector<std::string> none;
  json not_object = json::array({1, 2});
  Props q(not_object, "/x", none);
  CHECK(q.str("Id").empty());
  q.flush();
  CHECK(none.size() == 1);
}

TEST_CASE("PCI ids: hex with or without 0x, HPE's decimal, and nonsense", "[inventory]") {
  CHECK(parse_pci_id("0x10de") == 0x10de);
  CHECK(parse_pci_id("0x10DE") == 0x10de);
  CHECK(parse_pci_id("10de") == 0x10de);
  CHECK(parse_pci_id("4318") == 0x10de);   // HPE iLO writes decimal
  CHECK(parse_pci_id("41686") == 0xa2d6);  // BlueField-2, HPE
  CHECK_FALSE(parse_pci_id(""));
  CHECK_FALSE(parse_pci_id("0x"));
  CHECK_FALSE(parse_pci_id("0x1ffff"));
  CHECK_FALSE(parse_pci_id("nvidia"));
  CHECK(is_nvidia_vendor(" 0x10de "));
  CHECK_FALSE(is_nvidia_vendor("0x102b"));
}

TEST_CASE("PCIe classification: NVIDIA display functions are GPUs, the BMC's VGA is not", "[inventory]") {
  auto fn = [](const char* cls, const char* vendor, const char* device = "0x0000") {
    return PcieFunctionInfo{cls, vendor, device};
  };
  // DGX host side: H100 as a display controller; ASPEED VGA is not a GPU.
  CHECK(classify_pcie(json{{"Id", "00_1B_00"}}, {fn("DisplayController", "0x10DE", "0x2330")}) == PcieClass::kGpu);
  CHECK(classify_pcie(json{{"Id", "00_04_00"}}, {fn("DisplayController", "0x1A03")}) == PcieClass::kOther);
  // Lenovo's onboard Matrox "Adapter": display class, not NVIDIA: the 9th GPU of old.
  CHECK(classify_pcie(json{{"Id", "ob_1"}, {"Name", "Adapter"}}, {fn("DisplayController", "0x102b")}) ==
        PcieClass::kOther);
  // Supermicro: the BMC does not know the vendor (0x0000); the device says GPU.
  CHECK(classify_pcie(json{{"Id", "GPU1"}, {"Model", "H100 80GB HBM3"}}, {fn("DisplayController", "0x0000")}) ==
        PcieClass::kGpu);
  CHECK(classify_pcie(json{{"Id", "slot_2"}}, {fn("DisplayController", "0x0000")}) == PcieClass::kOther);
  CHECK(classify_pcie(json{{"Id", "x"}}, {fn("ProcessingAccelerators", "4318")}) == PcieClass::kGpu);
  // HGX baseboard: no DeviceClass at all; the GPU says so, the NVSwitch does not.
  CHECK(classify_pcie(json{{"Id", "GPU_SXM_1"}, {"Manufacturer", "NVIDIA"}}, {fn("", "0x10de", "0x2330")}) ==
        PcieClass::kGpu);
  CHECK(classify_pcie(json{{"Id", "NVSwitch_0"}, {"Manufacturer", "NVIDIA"}}, {fn("", "0x10de", "0x22a3")}) ==
        PcieClass::kOther);
  // Lenovo's PCIe switch board calls itself "... DW/SW GPU" but is class Other.
  CHECK(classify_pcie(json{{"Name", "ThinkSystem SR670 V2 Switched 4x x16 PCIe Gen4 DW/SW GPU"}},
                      {fn("Other", "0x1000")}) == PcieClass::kOther);
  // DPUs: by name or model, or by BlueField's device id (HPE writes it in decimal).
  CHECK(classify_pcie(json{{"Name", "BlueField-2 SmartNIC Main Card"}}, {fn("NetworkController", "5555", "41686")}) ==
        PcieClass::kDpu);
  CHECK(classify_pcie(json{{"Model", "MBF2M516C-CECOT"}}, {fn("NetworkController", "0x15b3", "0xa2d6")}) ==
        PcieClass::kDpu);
  CHECK(classify_pcie(json{{"Model", "MCX75310AAS-NEAT"}}, {fn("NetworkController", "0x15b3", "0x1021")}) ==
        PcieClass::kNic);
  CHECK(classify_pcie(json{{"Id", "NVMeSSD1"}}, {fn("MassStorageController", "0x144d")}) == PcieClass::kStorage);
  // Without functions the device's own words decide.
  CHECK(classify_pcie(json{{"Id", "GPU3"}}, {}) == PcieClass::kGpu);
  CHECK(classify_pcie(json{{"Id", "NIC3"}, {"Description", "NIC device"}}, {}) == PcieClass::kNic);
  CHECK(classify_pcie(json{{"Id", "Slot7"}}, {}) == PcieClass::kOther);
  CHECK(classify_pcie(json(nullptr), {}) == PcieClass::kOther);
}

TEST_CASE("GPUs: Lenovo lists each as a Processor and as a PCIe device: counted once, model from the card",
          "[inventory]") {
  std::vector<GpuSighting> s;
  std::vector<std::string> warnings;
  for (int i = 1; i <= 8; ++i) {
    const std::string serial = "13253220" + std::to_string(i);
    // Every processor links to the one chassis: that link must not merge them.
    s.push_back(sighting("processor", "/redfish/v1/Systems/1/Processors/GPU" + std::to_string(i), serial,
                         "/redfish/v1/Chassis/1", "/redfish/v1/Chassis/1/PCIeDevices/slot_" + std::to_string(i)));
    GpuSighting p = sighting("pcie", "/redfish/v1/Chassis/1/PCIeDevices/slot_" + std::to_string(i), serial,
                             "/redfish/v1/Chassis/1");
    p.model = "NVIDIA L40";
    s.push_back(p);
  }
  json gpus = merge_gpus(s, warnings);
  REQUIRE(gpus.size() == 8);
  for (const auto& g : gpus) {
    CHECK(g["model"] == "NVIDIA L40");
    CHECK(g["source"] == "processor");
    CHECK(g["sources"] == json::array({"processor", "pcie"}));
    CHECK(g["found_at"].size() == 2);
  }
  CHECK(warnings.empty());
}

TEST_CASE("GPUs: DGX baseboard processors, their own PCIe devices and the host's anonymous view are 8", "[inventory]") {
  std::vector<GpuSighting> s;
  std::vector<std::string> warnings;
  for (int i = 1; i <= 8; ++i) {
    const std::string n = std::to_string(i);
    GpuSighting p = sighting("processor", "/redfish/v1/Systems/HGX_Baseboard_0/Processors/GPU_SXM_" + n,
                             "16529230030" + n, "/redfish/v1/Chassis/HGX_GPU_SXM_" + n);
    p.model = "H100 80GB HBM3";
    p.memory_mib = 81559;
    s.push_back(p);
    // The board's PCIe device: no serial here, matched through its chassis.
    s.push_back(sighting("pcie", "/redfish/v1/Chassis/HGX_GPU_SXM_" + n + "/PCIeDevices/GPU_SXM_" + n, "",
                         "/redfish/v1/Chassis/HGX_GPU_SXM_" + n));
    // The host's PCIe bus: a display controller with nothing to match it by.
    s.push_back(sighting("pcie", "/redfish/v1/Chassis/DGX/PCIeDevices/00_1" + n + "_00", "", "/redfish/v1/Chassis/DGX"));
  }
  json gpus = merge_gpus(s, warnings);
  REQUIRE(gpus.size() == 8);
  CHECK(gpus[0]["memory_mib"] == 81559);
  CHECK(gpus[0]["found_at"].size() == 2);
  CHECK(warnings.empty());
}

TEST_CASE("GPUs: UUIDs and PCIe links merge, anonymous PCIe GPUs count only beyond the identified ones",
          "[inventory]") {
  std::vector<std::string> warnings;
  GpuSighting a = sighting("processor", "/p/GPU_0", "");
  a.uuid = "76def188";
  GpuSighting b = sighting("pcie", "/c/GPU_0", "");
  b.uuid = "76def188";
  GpuSighting c = sighting("processor", "/p/GPU_1", "", "", "/c/GPU_1");
  GpuSighting d = sighting("pcie", "/c/GPU_1", "");
  CHECK(merge_gpus({a, b, c, d}, warnings).size() == 2);
  CHECK(warnings.empty());

  // Two identified, three anonymous on the host's bus: three GPUs, and a warning.
  std::vector<GpuSighting> s = {sighting("processor", "/p/1", "S1"), sighting("processor", "/p/2", "S2"),
                                sighting("pcie", "/h/1", ""), sighting("pcie", "/h/2", ""), sighting("pcie", "/h/3", "")};
  CHECK(merge_gpus(s, warnings).size() == 3);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("3 GPUs on PCIe without a serial number or UUID, 2 identified"));

  // Only anonymous ones (no processor GPUs at all): each is a GPU.
  warnings.clear();
  CHECK(merge_gpus({sighting("pcie", "/h/1", ""), sighting("pcie", "/h/2", "")}, warnings).size() == 2);
  CHECK(warnings.empty());
  // GB200: processor GPUs with nothing but their Id are still GPUs.
  CHECK(merge_gpus({sighting("processor", "/p/GPU_0", ""), sighting("processor", "/p/GPU_1", "")}, warnings).size() == 2);
}

TEST_CASE("GPU entries from resources full of nulls: absent fields and warnings, never an exception", "[inventory]") {
  std::vector<std::string> warnings;
  json proc = {{"Id", "GPU_0"}, {"Model", nullptr}, {"SerialNumber", nullptr}, {"UUID", 5},
               {"MemorySummary", {{"TotalMemorySizeMiB", nullptr}}}, {"Links", nullptr},
               {"ProcessorId", {{"VendorId", "0x10de"}}}};
  GpuSighting g = gpu_from_processor(proc, "/p/GPU_0", 97871, warnings);
  CHECK(g.model.empty());
  CHECK(g.vendor == "NVIDIA");
  CHECK(g.memory_mib == 97871);  // from Links.Memory when the summary has none
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("SerialNumber") && Catch::Contains("UUID") &&
                              Catch::Contains("MemorySummary.TotalMemorySizeMiB"));

  json dev = {{"Id", "slot_3"}, {"Name", "NVIDIA L40"}, {"Model", "N/A"}, {"Manufacturer", "NVIDIA"},
              {"SerialNumber", "N/A"}};
  GpuSighting p = gpu_from_pcie(dev, "/c/slot_3", "/c", {}, warnings);
  CHECK(p.model == "NVIDIA L40");
  CHECK(p.serial.empty());  // "N/A" is no serial
  GpuSighting generic = gpu_from_pcie(json{{"Id", "GPU_SXM_1"}, {"Name", "PCIe Device"}}, "/c/GPU_SXM_1", "", {}, warnings);
  CHECK(generic.model.empty());
}

TEST_CASE("NICs, MACs and adapters", "[inventory]") {
  std::vector<std::string> warnings;
  CHECK(normalise_mac("AA-BB-CC-DD-EE-FF") == "aa:bb:cc:dd:ee:ff");
  CHECK(normalise_mac("aabb.ccdd.eeff") == "aa:bb:cc:dd:ee:ff");
  CHECK(normalise_mac("00:00:00:00:00:00").empty());
  CHECK(normalise_mac("aa:bb:cc").empty());
  CHECK(nic_entry(json{{"MACAddress", "AA:BB:CC:DD:EE:FF"}}, "/e/1", warnings)["mac"] == "aa:bb:cc:dd:ee:ff");
  CHECK(nic_entry(json{{"MACAddress", nullptr}, {"PermanentMACAddress", "a0:88:c2:08:80:97"}}, "/e/2", warnings)["mac"] ==
        "a0:88:c2:08:80:97");
  CHECK(nic_entry(json{{"Name", "no mac"}}, "/e/3", warnings).is_null());
  json port = {{"Ethernet", {{"AssociatedMACAddresses", {"B8:3F:D2:00:00:01", nullptr}}}},
               {"AssociatedNetworkAddresses", {"b8:3f:d2:00:00:02"}}};
  CHECK(macs_of(port, "/a/1/Ports/1", warnings) == std::vector<std::string>{"b8:3f:d2:00:00:01", "b8:3f:d2:00:00:02"});
  json adapter = {{"Id", "DE07A000"}, {"Name", "BlueField-2 SmartNIC Main Card"}, {"SerialNumber", "MT2246XZ0908   "},
                  {"Controllers", {{{"FirmwarePackageVersion", "24.35.1012"}}}}};
  json a = adapter_entry(adapter, "/a/1", {"b8:3f:d2:00:00:01"}, warnings);
  CHECK(a["dpu"] == true);
  CHECK(a["firmware"] == "24.35.1012");
  CHECK(a["serial"] == "MT2246XZ0908");

  // The same BlueField as a PCIe device and as an adapter is one DPU.
  json pcie = pcie_entry(json{{"Id", "226"}, {"Name", "BlueField-2 SmartNIC Main Card"}, {"SerialNumber", "MT2246XZ0908"}},
                         "/c/1/PCIeDevices/226", PcieClass::kDpu, {{"NetworkController", "5555", "41686"}}, warnings);
  CHECK(pcie["vendor_id"] == "15b3");
  CHECK(pcie["device_id"] == "a2d6");
  json dpus = merge_dpus(json::array({dpu_from_pcie(pcie), dpu_from_adapter(a)}));
  REQUIRE(dpus.size() == 1);
  CHECK(dpus[0]["macs"] == json::array({"b8:3f:d2:00:00:01"}));
  CHECK(dpus[0]["found_at"].size() == 2);
}

TEST_CASE("Other ComputerSystems: DPUs, GPU baseboards and other hosts", "[inventory]") {
  CHECK(classify_system(json{{"Id", "Bluefield"}, {"Boot", json::object()}}) == SystemRole::kDpu);
  CHECK(classify_system(json{{"Id", "s2"}, {"SystemType", "DPU"}}) == SystemRole::kDpu);
  CHECK(classify_system(json{{"Id", "HGX_Baseboard_0"}, {"SystemType", "Physical"}}) == SystemRole::kGpuBaseboard);
  // Nothing in its name, but nothing to boot either: a board of this machine.
  CHECK(classify_system(json{{"Id", "GPUBoard"}, {"SystemType", nullptr}}) == SystemRole::kGpuBaseboard);
  CHECK(classify_system(json{{"Id", "Node2"}, {"Boot", {{"BootSourceOverrideTarget", "Pxe"}}}}) ==
        SystemRole::kOtherHost);
  CHECK(classify_system(json(nullptr)) == SystemRole::kGpuBaseboard);
}

TEST_CASE("counts name each part so an operator can hold them against the profile", "[inventory]") {
  json inv = {{"cpus", {{"count", 2}, {"cores", 112}}},
              {"memory_mib", 2097152},
              {"gpus", json::array({{{"model", "H100 80GB HBM3"}}, {{"model", "H100 80GB HBM3"}}, {{"model", ""}}})},
              {"dpus", json::array({json::object()})},
              {"nics", json::array()},
              {"disks", nullptr}};
  json c = count_parts(inv);
  CHECK(c["cpus"] == 2);
  CHECK(c["gpus"] == 3);
  CHECK(c["gpu_models"] == json({{"H100 80GB HBM3", 2}, {"unknown", 1}}));
  CHECK(c["dpus"] == 1);
  CHECK(c["disks"] == 0);
  CHECK(count_parts(json(nullptr))["gpus"] == 0);
}
