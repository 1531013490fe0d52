// Redfish inventory against trees captured from real GPU servers
// (tests/fixtures/redfish, README there), served unchanged by kiln-vbmc, and
// with members made to fail (--fault-status). The expected figures come from
// the captures themselves: 8 H100 on the DGX, 4 GPUs on the GB200 tray, 2
// GH200, 8 L40 on the Lenovo, none on the HPE.

#include <utility>  // before Asio

#include <map>
#include <set>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/integration/redfish/driver_harness.h"
#include "tests/integration/redfish/vbmc_process.h"

namespace {

using namespace kiln;
using nlohmann::json;
using testing::DriverHarness;
using testing::vbmc_args;
using testing::VbmcProcess;

const std::string kTrees = KILN_REPO_REDFISH_FIXTURES;

json inspect_tree(const std::string& tree, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--mockup", kTrees + "/" + tree};
  args.insert(args.end(), extra.begin(), extra.end());
  VbmcProcess v(vbmc_args(args));
  DriverHarness h(v);
  Result<json> inv = h.inspect();
  INFO(tree << ": " << (inv ? std::string() : inv.error().message));
  REQUIRE(inv);
  return *inv;
}

std::set<std::string> serials(const json& gpus) {
  std::set<std::string> out;
  for (const auto& g : gpus) out.insert(g["serial"].get<std::string>());
  return out;
}

bool warned(const json& inv, const std::string& words) {
  for (const auto& w : inv["warnings"])
    if (w.get<std::string>().find(words) != std::string::npos) return true;
  return false;
}

const json* system_with_role(const json& inv, const std::string& role) {
  for (const auto& s : inv["systems"])
    if (s["role"] == role) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("DGX H100: 8 GPUs from the HGX baseboard system, each once, with model, memory and serial",
          "[redfish][inventory]") {
  json inv = inspect_tree("nvidia-dgx-h100");
  INFO(inv["gpus"].dump(1) << "\nwarnings: " << inv["warnings"].dump(1));
  CHECK(inv["system"]["redfish_uri"] == "/redfish/v1/Systems/DGX");
  const json* board = system_with_role(inv, "gpu_baseboard");
  REQUIRE(board);
  CHECK((*board)["redfish_uri"] == "/redfish/v1/Systems/HGX_Baseboard_0");
  REQUIRE(inv["gpus"].size() == 8);
  for (const auto& g : inv["gpus"]) {
    CHECK(g["model"] == "H100 80GB HBM3");
    CHECK(g["vendor"] == "NVIDIA");
    CHECK(g["memory_mib"] == 81559);  // Links.Memory -> GPU_SXM_n_DRAM_0
    CHECK_FALSE(g["firmware"].get<std::string>().empty());
    CHECK(g["source"] == "processor");
    CHECK(g["sources"] == json::array({"processor", "pcie"}));  // its own PCIe device, merged
  }
  CHECK(serials(inv["gpus"]).size() == 8);
  CHECK(serials(inv["gpus"]).count("1652923003067") == 1);
  CHECK(inv["counts"]["gpus"] == 8);
  CHECK(inv["counts"]["gpu_models"] == json({{"H100 80GB HBM3", 8}}));
  CHECK(inv["cpus"]["count"] == 2);
  // The host's own view of the GPUs (display controllers without serials)
  // is in pcie_devices, classified, but not counted again.
  int host_side = 0;
  for (const auto& d : inv["pcie_devices"])
    if (d["class"] == "gpu" && d["redfish_uri"].get<std::string>().find("/Chassis/DGX/") != std::string::npos) ++host_side;
  CHECK(host_side == 8);
  CHECK_FALSE(warned(inv, "without a serial number"));
}

TEST_CASE("GB200 tray: 4 GPUs on the baseboard, the Grace CPUs counted once", "[redfish][inventory]") {
  json inv = inspect_tree("nvidia-gb200");
  INFO(inv["gpus"].dump(1) << "\nwarnings: " << inv["warnings"].dump(1));
  CHECK(inv["system"]["redfish_uri"] == "/redfish/v1/Systems/System_0");
  REQUIRE(inv["gpus"].size() == 4);
  for (const auto& g : inv["gpus"]) CHECK(g["source"] == "processor");
  CHECK(inv["counts"]["gpus"] == 4);
  CHECK(inv["counts"]["gpu_models"] == json({{"unknown", 4}}));  // the capture names no model: said, not guessed
  CHECK(inv["cpus"]["count"] == 2);  // HGX_Baseboard_0 lists the same two Graces again
}

TEST_CASE("GH200: 2 GPUs with model, serial and UUID", "[redfish][inventory]") {
  json inv = inspect_tree("nvidia-gh200");
  INFO(inv["gpus"].dump(1) << "\nwarnings: " << inv["warnings"].dump(1));
  REQUIRE(inv["gpus"].size() == 2);
  for (const auto& g : inv["gpus"]) CHECK(g["model"] == "NVIDIA GH200 96GB HBM3");
  CHECK(serials(inv["gpus"]) == std::set<std::string>{"1640124000234", "1640124000373"});
  CHECK(inv["gpus"][0]["uuid"] == "76def188-0f6f-c471-d807-dee9ac946a39");
  CHECK(inv["cpus"]["count"] == 2);
}

TEST_CASE("Lenovo SR670 V2: 8 L40 seen as Processors and PCIe devices are 8, the Matrox VGA is none",
          "[redfish][inventory]") {
  json inv = inspect_tree("lenovo-sr670-v2");
  INFO(inv["gpus"].dump(1) << "\ndpus: " << inv["dpus"].dump(1) << "\nwarnings: " << inv["warnings"].dump(1));
  REQUIRE(inv["gpus"].size() == 8);
  for (const auto& g : inv["gpus"]) {
    CHECK(g["model"] == "NVIDIA L40");  // the processor has none; the PCIe device's Name does
    CHECK(g["sources"] == json::array({"processor", "pcie"}));
    CHECK(g["firmware"] == "95.02.39.00.01");
  }
  CHECK(serials(inv["gpus"]).size() == 8);
  CHECK(inv["counts"]["gpu_models"] == json({{"NVIDIA L40", 8}}));
  REQUIRE(inv["dpus"].size() == 1);
  CHECK(inv["dpus"][0]["serial"] == "MT2341XZ0A9M");
  CHECK(inv["cpus"]["count"] == 2);
  CHECK_FALSE(inv["nics"].empty());
}

TEST_CASE("HPE DL385: nulls everywhere are warnings, not an internal error, and a BlueField but no GPU",
          "[redfish][inventory]") {
  json inv = inspect_tree("hpe-dl385-gen10plus");
  INFO("dpus: " << inv["dpus"].dump(1) << "\nwarnings: " << inv["warnings"].dump(1));
  CHECK(inv["gpus"].empty());
  CHECK(inv["cpus"]["count"] == 2);
  CHECK(inv["cpus"]["model"] == "AMD EPYC 7763 64-Core Processor");  // padding trimmed
  CHECK(inv["memory_mib"].get<int64_t>() > 0);
  CHECK(warned(inv, "null or wrongly typed"));
  REQUIRE(inv["dpus"].size() == 1);
  const std::string dpu = inv["dpus"][0]["name"].get<std::string>() + " " + inv["dpus"][0]["model"].get<std::string>();
  CHECK_THAT(dpu, Catch::Contains("BlueField"));
  CHECK_FALSE(inv["nics"].empty());
  // PCI ids written in decimal are read as such: 5555 is Mellanox.
  bool mellanox = false;
  for (const auto& d : inv["pcie_devices"]) mellanox = mellanox || d["vendor_id"] == "15b3";
  CHECK(mellanox);
}

TEST_CASE("a member answering 500, 404 or 403 is skipped with a warning naming it, and the GPU is still found",
          "[redfish][inventory]") {
  const std::string proc = "/redfish/v1/Systems/HGX_Baseboard_0/Processors/GPU_SXM_2";
  const std::string dram = "/redfish/v1/Systems/HGX_Baseboard_0/Memory/GPU_SXM_1_DRAM_0";
  const std::string chassis = "/redfish/v1/Chassis/HGX_GPU_SXM_5/PCIeDevices/GPU_SXM_5";
  json inv = inspect_tree("nvidia-dgx-h100", {"--fault-status", proc + "=500", "--fault-status", dram + "=404",
                                              "--fault-status", chassis + "=403"});
  INFO("warnings: " << inv["warnings"].dump(1));
  CHECK(warned(inv, proc + " -> HTTP 500"));
  CHECK(warned(inv, dram + " -> HTTP 404"));
  CHECK(warned(inv, chassis + " -> HTTP 403"));
  // GPU_SXM_2 is still seen through its board's PCIe device (same serial).
  REQUIRE(inv["gpus"].size() == 8);
  CHECK(serials(inv["gpus"]).count("1652923004435") == 1);
  std::map<std::string, int> memory;
  for (const auto& g : inv["gpus"]) memory[g["memory_mib"].dump()]++;
  CHECK(memory["81559"] == 6);  // GPU_SXM_1 lost its DRAM resource, GPU_SXM_2 its processor
}

TEST_CASE("a whole collection failing is a warning too, and the rest is still read", "[redfish][inventory]") {
  json inv = inspect_tree("hpe-dl385-gen10plus", {"--fault-status", "/redfish/v1/Systems/1/Memory=503"});
  CHECK(warned(inv, "/redfish/v1/Systems/1/Memory -> HTTP 503"));
  CHECK(inv["cpus"]["count"] == 2);
}

TEST_CASE("Dell R750 with an H100 PCIe: one GPU seen as a Processor and a PCIe device, one BlueField-2",
          "[redfish][inventory]") {
  json inv = inspect_tree("dell-r750-h100");
  INFO(inv["gpus"].dump(1) << "\ndpus: " << inv["dpus"].dump(1));
  REQUIRE(inv["gpus"].size() == 1);
  CHECK(inv["gpus"][0]["model"] == "NVIDIA H100 PCIe");
  CHECK(inv["gpus"][0]["serial"] == "1654422007043");
  CHECK(inv["gpus"][0]["sources"] == json::array({"processor", "pcie"}));
  REQUIRE(inv["dpus"].size() == 1);
  CHECK(inv["dpus"][0]["serial"] == "MT2242XZ00QA");
  CHECK(inv["dpus"][0]["macs"] == json::array({"b8:3f:d2:90:97:c4"}));
  CHECK(inv["cpus"]["count"] == 2);
}

TEST_CASE("Dell R750 with two BlueField-3: two DPUs, each with its MAC, no GPU", "[redfish][inventory]") {
  json inv = inspect_tree("dell-r750-bluefield3");
  INFO("dpus: " << inv["dpus"].dump(1));
  CHECK(inv["gpus"].empty());
  REQUIRE(inv["dpus"].size() == 2);
  std::set<std::string> dpu_serials;
  for (const auto& d : inv["dpus"]) {
    dpu_serials.insert(d["serial"].get<std::string>());
    CHECK(d["macs"].size() == 1);
  }
  CHECK(dpu_serials == std::set<std::string>{"MT2328XZ1GA3", "MT2328XZ17WR"});
  CHECK(inv["counts"]["dpus"] == 2);
}
