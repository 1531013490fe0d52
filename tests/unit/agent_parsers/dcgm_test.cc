// dcgmi diag text fixtures.
#include <catch2/catch.hpp>

#include "agent/validate/parsers/dcgm.h"
#include "tests/unit/agent_parsers/fixtures.h"

using kiln::agent::parse_dcgm;
using nlohmann::json;

namespace {
const json& test_named(const json& d, const std::string& name) {
  for (const auto& t : d["tests"])
    if (t["name"] == name) return t;
  FAIL("no test " << name);
  static const json none;
  return none;
}
}  // namespace

TEST_CASE("dcgm: p4de r2 pass, DCGM 3.3.3", "[fixtures][dcgm]") {
  KILN_PARSE_FIXTURE(d, parse_dcgm, "dcgm/a100-p4de-8gpu-r2-pass-dcgm3.3.3.txt");
  CHECK(d["completed"] == true);
  CHECK(d["dcgm_version"] == "3.3.3");
  CHECK(d["driver_version"] == "535.104.12");
  CHECK(d["gpu_device_ids"] == json(std::vector<std::string>(8, "20b2")));
  for (const char* n : {"Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
                        "Persistence Mode", "Environment Variables", "Page Retirement/Row Remap",
                        "Graphics Processes", "Inforom"}) {
    const json& t = test_named(d, n);
    CHECK(t["category"] == "Deployment");
    CHECK(t["result"] == "Pass");
  }
  CHECK(test_named(d, "PCIe")["category"] == "Integration");
  CHECK(test_named(d, "PCIe")["result_text"] == "Pass - All");
  CHECK(test_named(d, "PCIe")["all_gpus"] == true);
  CHECK(test_named(d, "GPU Memory")["category"] == "Hardware");
  CHECK(test_named(d, "GPU Memory")["result"] == "Pass");
  for (const auto& t : d["tests"]) CHECK(t["category"] != "Stress");  // empty section
  CHECK(d["tests"].size() == 11);
  CHECK(d["run_level"] == 2);
  CHECK(d["overall"] == "pass");
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("dcgm: DCGM 4.4 could not load plugins", "[fixtures][dcgm]") {
  KILN_PARSE_FIXTURE(d, parse_dcgm, "dcgm/h100-r3-error-plugins-not-loaded-dcgm4.4.0.txt");
  CHECK(d["tests"].empty());
  REQUIRE(d["errors"].size() == 2);
  CHECK(d["errors"][0] ==
        "Error: Unable to complete diagnostic for entities *,cpu:*. Return: (-30) : DCGM GPU Diagnostic returned an error");
  CHECK(d["errors"][1] ==
        "Error: Cannot load plugins. Unable to change to the plugin dir "
        "'/usr/libexec/datacenter-gpu-manager-4/plugins/cuda13/': 'No such file or directory'");
  CHECK(d["completed"] == false);
  CHECK(d["overall"] == "fail");
  CHECK(d["health"]["status"] == "fail");
}

TEST_CASE("dcgm: L40S DCGM 4.2.3 pcie internal error", "[fixtures][dcgm]") {
  KILN_PARSE_FIXTURE(d, parse_dcgm, "dcgm/l40s-4gpu-r2-pcie-fail-internal-error-dcgm4.2.3.txt");
  CHECK(d["dcgm_version"] == "4.2.3");
  CHECK(d["driver_version"] == "570.148.08");
  CHECK(d["gpu_device_ids"] == json({"26b9", "26b9", "26b9", "26b9"}));
  const json gpus_pass = json::array({{{"entity", "GPU0"}, {"result", "Pass"}},
                                      {{"entity", "GPU1"}, {"result", "Pass"}},
                                      {{"entity", "GPU2"}, {"result", "Pass"}},
                                      {{"entity", "GPU3"}, {"result", "Pass"}}});
  const json& sw = test_named(d, "software");
  CHECK(sw["category"] == "Deployment");
  CHECK(sw["result"] == "Pass");
  CHECK(sw["entities"] == gpus_pass);
  const json& mem = test_named(d, "memory");
  CHECK(mem["category"] == "Hardware");
  CHECK(mem["entities"] == gpus_pass);
  const json& pcie = test_named(d, "pcie");
  CHECK(pcie["category"] == "Integration");
  CHECK(pcie["result"] == "Fail");
  CHECK(pcie["entities"] == gpus_pass);
  REQUIRE(pcie["messages"].size() == 4);
  for (const auto& m : pcie["messages"]) CHECK(m["kind"] == "Warning");
  CHECK(pcie["messages"][0]["text"] ==
        "There was an internal error during the test: 'A child process (152) exited with non-zero status 1' "
        "Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics.");
  CHECK(pcie["messages"][3]["text"].get<std::string>().find("Output of child process (153) couldn't be parsed") !=
        std::string::npos);
  CHECK(pcie["messages"][3]["text"].get<std::string>().find("value, object or array expected") != std::string::npos);
  CHECK(d["overall"] == "fail");
  CHECK(d["health"]["status"] == "fail");
}

TEST_CASE("dcgm: DCGM 2.4.6 fragment, NVLink down warnings, cut last row", "[fixtures][dcgm]") {
  KILN_PARSE_FIXTURE(d, parse_dcgm, "dcgm/a100-pcie-r2-fragment-pcie-fail-nvlink-down-dcgm2.4.6.txt");
  REQUIRE(d["tests"].size() == 1);
  const json& pcie = d["tests"][0];
  CHECK(pcie["name"] == "PCIe");
  CHECK(pcie["category"] == "Integration");
  CHECK(pcie["result"] == "Fail");
  CHECK(pcie["result_text"] == "Fail - All");
  REQUIRE(pcie["messages"].size() == 1);
  const std::string text = pcie["messages"][0]["text"];
  for (int link = 0; link <= 4; ++link)
    CHECK(text.find("GPU 0GPU 0's NvLink link " + std::to_string(link) +
                    " is currently down Run a field diagnostic on the GPU.") != std::string::npos);
  CHECK(d["overall"] == "fail");
}

TEST_CASE("dcgm: r3 fragment, Deployment error row remap pending", "[fixtures][dcgm]") {
  KILN_PARSE_FIXTURE(d, parse_dcgm, "dcgm/r3-fragment-deployment-error-row-remap-pending.txt");
  REQUIRE(d["category_messages"].size() == 1);
  CHECK(d["category_messages"][0] ==
        json({{"category", "Deployment"}, {"kind", "Error"},
              {"text", "GPU 3 has uncorrectable memory errors and row remappings are pending"}}));
  CHECK(d["overall"] == "fail");
  CHECK(d["health"]["status"] == "fail");
}

TEST_CASE("dcgm: DCGM 2/3 per-GPU result lines", "[dcgm]") {
  const std::string text =
      "+-----  Hardware  ----------+------------------------------------------------+\n"
      "| GPU Memory                | Pass - GPUs: 1, 2, 3, 4, 5, 6, 7               |\n"
      "|                           | Fail - GPU: 0                                  |\n"
      "| Warning                   | GPU 0 Thermal violations totaling 13.3 second  |\n"
      "|                           | s started at 9.7 seconds into the test for GP  |\n"
      "|                           | U 0                                            |\n"
      "+-----  Stress  ------------+------------------------------------------------+\n"
      "| Targeted Stress           | Skip - All                                     |\n"
      "+---------------------------+------------------------------------------------+\n";
  auto r = parse_dcgm(text);
  REQUIRE(r.ok());
  const json& mem = (*r)["tests"][0];
  CHECK(mem["result"] == "Fail");
  CHECK(mem["entities"].size() == 8);
  CHECK(mem["entities"][7] == json({{"entity", "GPU0"}, {"result", "Fail"}}));
  CHECK(mem["messages"][0]["text"] ==
        "GPU 0 Thermal violations totaling 13.3 seconds started at 9.7 seconds into the test for GPU 0");
  CHECK((*r)["tests"][1]["result"] == "Skip");
  CHECK((*r)["run_level"] == 3);
  CHECK((*r)["overall"] == "fail");
}
