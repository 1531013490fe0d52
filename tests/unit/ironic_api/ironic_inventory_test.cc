// GET /v1/nodes/{id}/inventory in ironic-python-agent's shape, from both
// inventories Kiln stores (kiln-agent's and the BMC-read one).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "controller/ironic/ironic_inventory.h"

using namespace kiln;
using namespace kiln::ironic;
using nlohmann::json;

namespace {

Node agent_inspected() {
  Node n;
  n.id = "6f1c0c8e-3a77-4d7e-9c39-4c1b0b9a2f10";
  n.bmc.driver = "redfish";
  n.bmc.address = "https://10.20.0.9:8443/redfish";
  n.ports.push_back(Port{"p1", n.id, "52:54:00:1c:00:02", false, 0});
  n.ports.push_back(Port{"p2", n.id, "52:54:00:1c:00:01", true, 0});
  n.inventory = {
      {"schema_version", 1},
      {"kernel", "6.1.0-18-amd64"},
      {"cpu", {{"model", "Intel(R) Xeon(R) Platinum 8480+"}, {"architecture", "x86_64"}, {"sockets", 2},
               {"cores", 112}, {"threads", 224}, {"flags", {"avx512f", "amx_tile"}}}},
      {"memory", {{"total_bytes", 2164663595008LL}, {"physical_bytes", 2199023255552LL}, {"dimms", 32}}},
      {"disks", {{{"name", "nvme0n1"}, {"size_bytes", 3840755982336LL}, {"model", "SAMSUNG MZ"}, {"serial", "S6"},
                  {"wwn", "eui.0025"}, {"rotational", false}, {"removable", false}, {"nvme", true},
                  {"logical_block_size", 512}, {"physical_block_size", 512}}}},
      {"nics", {{{"name", "eno1"}, {"mac", "52:54:00:1c:00:01"}, {"driver", "ice"}, {"speed_mbps", 100000},
                 {"carrier", true}, {"pci_address", "0000:17:00.0"}}}},
      {"dmi", {{"sys_vendor", "Supermicro"}, {"product_name", "SYS-821GE"}, {"product_serial", "S123"},
               {"bios_vendor", "American Megatrends"}, {"bios_version", "2.1"}, {"bios_date", "03/01/2024"}}},
      {"boot_mode", "uefi"},
      {"hypervisor", {{"virtual", false}, {"vendor", nullptr}, {"evidence", json::array()}}},
      {"gpus", {{{"model", "H100"}}}}};
  return n;
}

}  // namespace

TEST_CASE("ironic inventory: kiln-agent's inventory in IPA's shape") {
  json r = ironic_inventory(agent_inspected());
  REQUIRE(r.contains("inventory"));
  REQUIRE(r.contains("plugin_data"));
  const json& inv = r["inventory"];
  CHECK(inv["cpu"] == json{{"model_name", "Intel(R) Xeon(R) Platinum 8480+"}, {"frequency", nullptr}, {"count", 224},
                           {"architecture", "x86_64"}, {"flags", {"avx512f", "amx_tile"}}, {"socket_count", 2}});
  CHECK(inv["memory"] == json{{"total", 2164663595008LL}, {"physical_mb", 2097152}});
  REQUIRE(inv["interfaces"].size() == 1);
  CHECK(inv["interfaces"][0]["name"] == "eno1");
  CHECK(inv["interfaces"][0]["mac_address"] == "52:54:00:1c:00:01");
  CHECK(inv["interfaces"][0]["has_carrier"] == true);
  CHECK(inv["interfaces"][0]["speed_mbps"] == 100000);
  CHECK(inv["interfaces"][0].contains("ipv4_address"));
  REQUIRE(inv["disks"].size() == 1);
  CHECK(inv["disks"][0]["name"] == "/dev/nvme0n1");
  CHECK(inv["disks"][0]["size"] == 3840755982336LL);
  CHECK(inv["disks"][0]["rotational"] == false);
  CHECK(inv["disks"][0]["wwn"] == "eui.0025");
  CHECK(inv["system_vendor"] == json{{"product_name", "SYS-821GE"}, {"serial_number", "S123"},
                                     {"manufacturer", "Supermicro"},
                                     {"firmware", {{"vendor", "American Megatrends"}, {"version", "2.1"},
                                                   {"build_date", "03/01/2024"}}}});
  CHECK(inv["bmc_address"] == "10.20.0.9");
  CHECK(inv["bmc_v6address"] == "::/0");
  CHECK(inv["boot"] == json{{"current_boot_mode", "uefi"}, {"pxe_interface", "52:54:00:1c:00:01"}});
  CHECK(r["plugin_data"]["source"] == "agent");
  CHECK(r["plugin_data"]["gpus"] == json::array({{{"model", "H100"}}}));
  CHECK(r["plugin_data"]["kernel"] == "6.1.0-18-amd64");
}

TEST_CASE("ironic inventory: a BMC-read inventory (redfish, fake) maps too") {
  Node n;
  n.bmc.driver = "ipmi";
  n.bmc.address = "[fd00::9]:623";
  n.boot_mode = "bios";
  n.inventory = {{"source", "redfish"},
                 {"system", {{"manufacturer", "Dell Inc."}, {"product", "PowerEdge XE9680"}, {"serial", "7XK"}}},
                 {"firmware", {{"bios", "1.6.5"}}},
                 {"cpus", {{"count", 2}, {"cores", 96}, {"threads", 192}, {"model", "Xeon 8468"},
                           {"items", {{{"id", "CPU.1"}, {"arch", "x86_64"}}}}}},
                 {"memory_mib", 2097152},
                 {"disks", {{{"name", "Disk.0"}, {"size_bytes", 960197124096LL}, {"rotational", false}}}},
                 {"nics", {{{"id", "NIC.1"}, {"mac", "aa:bb:cc:dd:ee:01"}, {"speed_mbps", 25000}, {"link", "LinkUp"}}}}};
  json inv = ironic_inventory(n)["inventory"];
  CHECK(inv["cpu"]["count"] == 192);
  CHECK(inv["cpu"]["socket_count"] == 2);
  CHECK(inv["cpu"]["architecture"] == "x86_64");
  CHECK(inv["memory"] == json{{"total", 2097152LL * 1024 * 1024}, {"physical_mb", 2097152}});
  CHECK(inv["interfaces"][0]["name"] == "NIC.1");
  CHECK(inv["interfaces"][0]["has_carrier"] == true);
  CHECK(inv["disks"][0]["name"] == "/dev/Disk.0");
  CHECK(inv["system_vendor"]["manufacturer"] == "Dell Inc.");
  CHECK(inv["system_vendor"]["firmware"]["version"] == "1.6.5");
  CHECK(inv["bmc_address"] == "0.0.0.0");
  CHECK(inv["bmc_v6address"] == "fd00::9");
  CHECK(inv["boot"]["current_boot_mode"] == "bios");
  CHECK(inv["boot"]["pxe_interface"].is_null());
}

TEST_CASE("ironic inventory: mistyped or hostile stored values become null, lists are bounded") {
  Node n;
  n.bmc.driver = "fake";
  n.bmc.address = "fake-hardware";
  json many = json::array();
  for (std::size_t i = 0; i < kMaxInventoryItems + 10; ++i) many.push_back({{"name", "d" + std::to_string(i)}});
  n.inventory = {{"cpu", "lots"}, {"memory", {{"total_bytes", "2 TB"}}}, {"disks", many},
                 {"nics", {1, "x", {{"mac", 7}, {"carrier", "yes"}}}}, {"dmi", {{"sys_vendor", 3}}},
                 {"gpus", many}};
  json r;
  REQUIRE_NOTHROW(r = ironic_inventory(n));
  const json& inv = r["inventory"];
  CHECK(inv["cpu"]["model_name"].is_null());
  CHECK(inv["cpu"]["count"].is_null());
  CHECK(inv["memory"]["total"].is_null());
  CHECK(inv["disks"].size() == kMaxInventoryItems);
  REQUIRE(inv["interfaces"].size() == 1);
  CHECK(inv["interfaces"][0]["mac_address"].is_null());
  CHECK(inv["interfaces"][0]["has_carrier"] == false);
  CHECK(inv["system_vendor"]["manufacturer"].is_null());
  CHECK(inv["bmc_address"] == "0.0.0.0");
  CHECK_FALSE(r["plugin_data"].contains("gpus"));
}
