// nvidia-smi topo -m and nvidia-smi nvlink -s fixtures.
#include <catch2/catch.hpp>

#include <set>

#include "agent/validate/parsers/nvlink.h"
#include "agent/validate/parsers/topo.h"
#include "tests/unit/agent_parsers/fixtures.h"

using kiln::agent::parse_nvlink;
using kiln::agent::parse_topo;
using nlohmann::json;

TEST_CASE("topo: 8 x H100 NV18 with 6 NICs and blank CPU affinity", "[fixtures][topo]") {
  KILN_PARSE_FIXTURE(d, parse_topo, "topo/h100-8gpu-nv18-6nic-blank-cpu-affinity.txt");
  CHECK(d["devices"] == json({"GPU0", "GPU1", "GPU2", "GPU3", "GPU4", "GPU5", "GPU6", "GPU7", "NIC0", "NIC1",
                              "NIC2", "NIC3", "NIC4", "NIC5"}));
  const json& m = d["matrix"];
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      CHECK(m["GPU" + std::to_string(a)]["GPU" + std::to_string(b)] == (a == b ? "X" : "NV18"));
  const std::set<std::pair<int, int>> pix = {{0, 0}, {0, 1}, {3, 2}, {4, 3}, {4, 4}, {6, 5}};
  for (int g = 0; g < 8; ++g)
    for (int n = 0; n < 6; ++n)
      CHECK(m["GPU" + std::to_string(g)]["NIC" + std::to_string(n)] == (pix.count({g, n}) ? "PIX" : "NODE"));
  CHECK(m["NIC0"]["NIC1"] == "PIX");
  CHECK(m["NIC3"]["NIC4"] == "PIX");
  CHECK(m["NIC0"]["NIC2"] == "NODE");
  for (int g = 0; g < 8; ++g) {
    const json& gpu = d["gpus"][g];
    CHECK(gpu["cpu_affinity"] == (g < 4 ? "" : "1"));
    CHECK(gpu["numa_affinity"] == (g < 4 ? "0" : "1"));
    CHECK(gpu["gpu_numa_id"] == "N/A");
  }
  REQUIRE(d["nics"].size() == 6);
  for (int n = 0; n < 6; ++n) CHECK(d["nics"][n]["device"] == "mlx5_" + std::to_string(n));
  CHECK(d["legend"].size() == 7);
  CHECK(d["nvlink_pairs"].size() == 28);
  CHECK(d["nvlink_pairs"][0] == json({{"a", "GPU0"}, {"b", "GPU1"}, {"links", 18}}));
  CHECK(d["summary"]["all_gpu_pairs_nvlink"] == true);
  CHECK(d["summary"]["min_nvlinks_per_pair"] == 18);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("topo: GKE A3 VM, ANSI-underlined header, no NICs", "[fixtures][topo]") {
  KILN_PARSE_FIXTURE(d, parse_topo, "topo/h100-8gpu-nv18-gke-a3-vm-no-nics.txt");
  CHECK(d["devices"].size() == 8);
  CHECK(d["nics"].empty());
  CHECK(d["summary"]["all_gpu_pairs_nvlink"] == true);
  CHECK(d["summary"]["gpu_pair_connections"] == json({{"NV18", 28}}));
  for (int g = 0; g < 8; ++g) {
    CHECK(d["gpus"][g]["cpu_affinity"] == (g < 4 ? "0-51,104-155" : "52-103,156-207"));
    CHECK(d["gpus"][g]["numa_affinity"] == (g < 4 ? "0" : "1"));
    CHECK(d["gpus"][g]["gpu_numa_id"] == "N/A");
  }
  CHECK(d["legend"].size() == 7);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("topo: PCIe-only A100 with spaces pasted next to the tabs", "[fixtures][topo]") {
  KILN_PARSE_FIXTURE(d, parse_topo, "topo/a100-pcie-1gpu-4nic-pcie-only-realigned.txt");
  const json& m = d["matrix"];
  CHECK(m["GPU0"]["GPU0"] == "X");
  CHECK(m["GPU0"]["NIC0"] == "SYS");
  CHECK(m["GPU0"]["NIC1"] == "SYS");
  CHECK(m["GPU0"]["NIC2"] == "NODE");
  CHECK(m["GPU0"]["NIC3"] == "NODE");
  CHECK(m["NIC0"]["NIC1"] == "PIX");
  CHECK(m["NIC2"]["NIC3"] == "PIX");
  CHECK(m["NIC1"]["NIC1"] == "X");
  CHECK(d["gpus"][0]["cpu_affinity"] == "64-127,192-255");
  CHECK(d["gpus"][0]["numa_affinity"] == "1");
  CHECK(d["gpus"][0]["gpu_numa_id"] == "N/A");
  CHECK(d["nics"][3]["device"] == "mlx5_3");
  CHECK(d["summary"]["gpu_count"] == 1);
  CHECK(d["summary"]["all_gpu_pairs_nvlink"] == false);  // no pairs at all
  CHECK(d["nvlink_pairs"].empty());
}

TEST_CASE("topo: a partial NVLink mesh and a capture that lost its tabs", "[topo]") {
  const std::string text =
      "        GPU0    GPU1    GPU2    CPU Affinity    NUMA Affinity\n"
      "GPU0     X      NV12    SYS     0-15    0\n"
      "GPU1    NV12     X      NV12    0-15    0\n"
      "GPU2    SYS     NV12     X      16-31   1\n";
  auto r = parse_topo(text);
  REQUIRE(r.ok());
  CHECK((*r)["matrix"]["GPU0"]["GPU2"] == "SYS");
  CHECK((*r)["gpus"][2]["cpu_affinity"] == "16-31");
  CHECK((*r)["summary"]["all_gpu_pairs_nvlink"] == false);
  CHECK((*r)["nvlink_pairs"].size() == 2);
  CHECK_FALSE((*r)["health"]["warnings"].empty());
}

TEST_CASE("nvlink: 8 x A100, all 12 links up", "[fixtures][nvlink]") {
  KILN_PARSE_FIXTURE(d, parse_nvlink, "nvlink/a100-8gpu-all-links-up.txt");
  REQUIRE(d["gpus"].size() == 8);
  for (int g = 0; g < 8; ++g) {
    const json& gpu = d["gpus"][g];
    CHECK(gpu["index"] == g);
    CHECK(gpu["name"] == "NVIDIA A100-SXM4-80GB");
    CHECK(gpu["uuid"].get<std::string>().rfind("GPU-", 0) == 0);
    CHECK(gpu["link_count"] == 12);
    for (const auto& l : gpu["links"]) {
      CHECK(l["active"] == true);
      CHECK(l["speed_gb_s"] == 25.0);
    }
  }
  CHECK(d["gpus"][0]["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486");
  CHECK(d["summary"]["link_count"] == 96);
  CHECK(d["summary"]["active_links"] == 96);
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nvlink: one H100 on GKE, 18 links, tab-indented", "[fixtures][nvlink]") {
  KILN_PARSE_FIXTURE(d, parse_nvlink, "nvlink/h100-1gpu-18-links-up-gke.txt");
  REQUIRE(d["gpus"].size() == 1);
  CHECK(d["gpus"][0]["uuid"] == "GPU-2e37c77d-9f00-a42d-bec1-d72b36af9983");
  REQUIRE(d["gpus"][0]["links"].size() == 18);
  for (int i = 0; i < 18; ++i) {
    CHECK(d["gpus"][0]["links"][i]["link"] == i);
    CHECK(d["gpus"][0]["links"][i]["speed_gb_s"] == 26.562);
  }
  CHECK(d["summary"]["speeds_gb_s"] == json({26.562}));
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("nvlink: V100 GPU 3 with two inactive links", "[fixtures][nvlink]") {
  KILN_PARSE_FIXTURE(d, parse_nvlink, "nvlink/v100-gpu3-two-links-inactive-issue-excerpt.txt");
  REQUIRE(d["gpus"].size() == 1);
  const json& g = d["gpus"][0];
  CHECK(g["index"] == 3);
  CHECK(g["name"] == "Tesla V100-SXM2-32GB");
  CHECK(g["uuid"] == "...");
  REQUIRE(g["links"].size() == 6);
  for (int i : {0, 1, 2, 4}) {
    CHECK(g["links"][i]["active"] == true);
    CHECK(g["links"][i]["speed_gb_s"] == 25.781);
  }
  for (int i : {3, 5}) {
    CHECK(g["links"][i]["active"] == false);
    CHECK(g["links"][i]["state"] == "<inactive>");
  }
  CHECK(g["active_links"] == 4);
  CHECK(g["inactive_links"] == 2);
  CHECK(d["health"]["status"] == "fail");
  CHECK(d["health"]["reasons"].size() == 2);
}

TEST_CASE("nvlink: NVML all-links-inactive message fails", "[nvlink]") {
  auto r = parse_nvlink("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n"
                        "NVML: Unable to retrieve NVLink information as all links are inActive\n");
  REQUIRE(r.ok());
  CHECK((*r)["health"]["status"] == "fail");
}
