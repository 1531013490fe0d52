// nvidia-smi -q fixtures.
#include <catch2/catch.hpp>

#include "agent/validate/parsers/smi_query.h"
#include "tests/unit/agent_parsers/fixtures.h"

using kiln::agent::parse_smi_query;
using nlohmann::json;

namespace {
void ecc_all_zero(const json& ecc) {
  for (const char* scope : {"volatile", "aggregate"})
    for (auto it = ecc[scope].begin(); it != ecc[scope].end(); ++it)
      if (it->is_number()) CHECK(*it == 0);
  CHECK(ecc["volatile_correctable"] == 0);
  CHECK(ecc["volatile_uncorrectable"] == 0);
  CHECK(ecc["aggregate_correctable"] == 0);
  CHECK(ecc["aggregate_uncorrectable"] == 0);
}
}  // namespace

TEST_CASE("smi-query: 8 x H100 with HW power brake active", "[fixtures][smi-query]") {
  KILN_PARSE_FIXTURE(d, parse_smi_query, "smi-query/h100-8gpu-q-535.161.08-hw-power-brake-active.txt");
  CHECK(d["attached_gpus"] == 8);
  CHECK(d["driver_version"] == "535.161.08");
  CHECK(d["cuda_version"] == "12.2");
  REQUIRE(d["gpus"].size() == 8);
  const std::vector<std::string> buses = {"19", "3B", "4C", "5D", "9B", "BB", "CB", "DB"};
  for (std::size_t i = 0; i < 8; ++i) {
    const json& g = d["gpus"][i];
    CHECK(g["bus_id"] == "00000000:" + buses[i] + ":00.0");
    CHECK(g["product_name"] == "NVIDIA H100 80GB HBM3");
    CHECK(g["active_clock_event_reasons"] == json({"HW Power Brake Slowdown", "HW Slowdown"}));
    CHECK(g["clock_event_reasons"]["Idle"] == "Not Active");
    CHECK(g["clock_event_reasons"]["HW Thermal Slowdown"] == "Not Active");
    CHECK(g["clock_event_reasons"].size() == 9);
    CHECK(g["clocks"]["graphics_mhz"] == 86.0);
    CHECK(g["clocks"]["sm_mhz"] == 86.0);
    CHECK(g["clocks"]["max_graphics_mhz"] == 1980.0);
    CHECK(g["performance_state"] == "P0");
    CHECK(g["ecc_mode"]["current"] == "Enabled");
    ecc_all_zero(g["ecc_errors"]);
    CHECK(g["ecc_errors"]["volatile"].contains("SRAM Uncorrectable Parity"));
    CHECK(g["ecc_errors"]["volatile"].contains("SRAM Uncorrectable SEC-DED"));
    CHECK(g["ecc_errors"]["aggregate_uncorrectable_sram_sources"].size() == 5);
    CHECK(g["remapped_rows"]["correctable"] == 0);
    CHECK(g["remapped_rows"]["uncorrectable"] == 0);
    CHECK(g["remapped_rows"]["pending"] == false);
    CHECK(g["remapped_rows"]["failure"] == false);
    const double t = g["temperature"]["gpu_c"].get<double>();
    CHECK(t >= 29.0);
    CHECK(t <= 32.0);
    CHECK(g["health"]["status"] == "fail");
  }
  CHECK(d["health"]["status"] == "fail");
  CHECK(d["health"]["reasons"].size() == 16);
}

TEST_CASE("smi-query: nvidia-smi -a on one H100 (545)", "[fixtures][smi-query]") {
  KILN_PARSE_FIXTURE(d, parse_smi_query, "smi-query/h100-sxm-1gpu-nvidia-smi-a-545.txt");
  CHECK(d["attached_gpus"] == 1);
  REQUIRE(d["gpus"].size() == 1);
  const json& g = d["gpus"][0];
  CHECK(g["bus_id"] == "00000000:19:00.0");
  CHECK(g["display_mode"] == "Enabled");
  CHECK(g["persistence_mode"] == "Enabled");
  CHECK(g["mig_mode_current"] == "Disabled");
  CHECK(g["pcie"]["gen_current"] == 5);
  CHECK(g["pcie"]["width_current"] == 16);
  CHECK(g["pcie"]["replays_since_reset"] == 0);
  CHECK(g["performance_state"] == "P0");
  CHECK(g["active_clock_event_reasons"] == json({"Idle"}));
  ecc_all_zero(g["ecc_errors"]);
  CHECK(g["retired_pages"]["single_bit_ecc"].is_null());  // N/A
  CHECK(g["retired_pages"]["double_bit_ecc"].is_null());
  CHECK(g["retired_pages"]["pending"].is_null());
  CHECK(g["fields"]["Retired Pages"]["Single Bit ECC"] == "N/A");
  CHECK(g["remapped_rows"]["correctable"] == 0);
  CHECK(g["remapped_rows"]["uncorrectable"] == 0);
  CHECK(g["remapped_rows"]["pending"] == false);
  CHECK(g["remapped_rows"]["histogram"]["max"] == 2560);
  CHECK(g["temperature"]["gpu_c"] == 33.0);
  CHECK(g["power"]["draw_w"] == 72.02);
  CHECK(g["power"]["limit_w"] == 700.0);
  CHECK(g["fabric"] == json({{"state", "Completed"}, {"status", "Success"}}));
  CHECK(g["health"]["status"] == "pass");
  CHECK(d["health"]["status"] == "pass");
}

TEST_CASE("smi-query: -d ECC,PERFORMANCE,TEMPERATURE,POWER on one H100 (535)", "[fixtures][smi-query]") {
  KILN_PARSE_FIXTURE(d, parse_smi_query, "smi-query/h100-1gpu-q-d-ecc-perf-temp-power-535.309.txt");
  REQUIRE(d["gpus"].size() == 1);
  const json& g = d["gpus"][0];
  CHECK(g["bus_id"] == "00000000:04:00.0");
  CHECK(g["product_name"].is_null());
  CHECK(g["performance_state"] == "P0");
  CHECK(g["active_clock_event_reasons"] == json({"Idle"}));
  CHECK(g["fields"]["Sparse Operation Mode"] == "Disabled");
  CHECK(g["ecc_mode"] == json({{"current", "Enabled"}, {"pending", "Enabled"}}));
  ecc_all_zero(g["ecc_errors"]);
  CHECK(g["ecc_errors"]["sram_threshold_exceeded"] == false);
  for (auto it = g["ecc_errors"]["aggregate_uncorrectable_sram_sources"].begin();
       it != g["ecc_errors"]["aggregate_uncorrectable_sram_sources"].end(); ++it)
    CHECK(*it == 0);
  CHECK(g["temperature"]["gpu_c"] == 33.0);
  CHECK(g["temperature"]["t_limit_c"] == 54.0);
  CHECK(g["temperature"]["memory_c"] == 37.0);
  CHECK(g["power"]["draw_w"] == 93.17);
  CHECK(g["power"]["limit_w"] == 700.0);
  CHECK(g["power"]["samples"] == json({{"max_w", 124.85}, {"min_w", 70.95}, {"avg_w", 99.55}, {"count", 119}}));
  CHECK(g["fields"]["Module Power Readings"]["Power Draw"] == "N/A");
  CHECK(g["remapped_rows"].is_null());
  CHECK(g["health"]["status"] == "pass");
}

TEST_CASE("smi-query: A100 excerpt with DRAM CE and a pending row remap", "[fixtures][smi-query]") {
  KILN_PARSE_FIXTURE(d, parse_smi_query, "smi-query/a100-80gb-q-excerpt-dram-ce-row-remap-pending.txt");
  CHECK(d["attached_gpus"] == 8);
  REQUIRE(d["gpus"].size() == 1);
  const json& g = d["gpus"][0];
  CHECK(g["bus_id"] == "00000000:10:1C.0");
  CHECK(g["product_name"] == "NVIDIA A100-SXM4-80GB");
  for (const char* scope : {"volatile", "aggregate"}) {
    CHECK(g["ecc_errors"][scope]["DRAM Correctable"] == 177);
    CHECK(g["ecc_errors"][scope]["DRAM Uncorrectable"] == 0);
    CHECK(g["ecc_errors"][scope]["SRAM Correctable"] == 0);
    CHECK(g["ecc_errors"][scope]["SRAM Uncorrectable"] == 0);
  }
  CHECK(g["ecc_errors"]["volatile_correctable"] == 177);
  CHECK(g["ecc_errors"]["aggregate_uncorrectable"] == 0);
  CHECK(g["retired_pages"]["single_bit_ecc"].is_null());
  CHECK(g["remapped_rows"] == json({{"correctable", 1},
                                    {"uncorrectable", 0},
                                    {"pending", true},
                                    {"failure", false},
                                    {"histogram", {{"max", 639}, {"high", 1}, {"partial", 0}, {"low", 0}, {"none", 0}}}}));
  CHECK(g["health"]["status"] == "fail");
  CHECK(d["health"]["status"] == "fail");
}

TEST_CASE("smi-query: old driver layout (throttle reasons, single/double bit ECC)", "[smi-query]") {
  const std::string text =
      "==============NVSMI LOG==============\n\nAttached GPUs                       : 1\n"
      "GPU 00000000:00:1E.0\n"
      "    Product Name                    : Tesla V100-SXM2-16GB\n"
      "    Clocks Throttle Reasons\n"
      "        Idle                        : Not Active\n"
      "        HW Slowdown                 : Not Active\n"
      "        SW Thermal Slowdown         : Active\n"
      "    ECC Errors\n"
      "        Volatile\n"
      "            Single Bit            \n"
      "                Device Memory       : 3\n"
      "                Total               : 3\n"
      "            Double Bit            \n"
      "                Device Memory       : 1\n"
      "                Total               : 1\n"
      "    Retired Pages\n"
      "        Single Bit ECC              : 2\n"
      "        Double Bit ECC              : 1\n"
      "        Pending                     : Yes\n";
  auto r = parse_smi_query(text);
  REQUIRE(r.ok());
  const json& g = (*r)["gpus"][0];
  CHECK(g["active_clock_event_reasons"] == json({"SW Thermal Slowdown"}));
  CHECK(g["ecc_errors"]["volatile_correctable"] == 3);
  CHECK(g["ecc_errors"]["volatile_uncorrectable"] == 1);
  CHECK(g["retired_pages"] == json({{"single_bit_ecc", 2}, {"double_bit_ecc", 1}, {"pending", true}}));
  CHECK(g["health"]["status"] == "fail");
  CHECK(g["health"]["reasons"].size() == 3);  // SW thermal, volatile DBE, pending retirement
}
