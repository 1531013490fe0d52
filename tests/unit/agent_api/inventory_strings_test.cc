// An agent's inventory is firmware's text (SMBIOS vendor, model and serial,
// NIC and disk names): drivers/agent cleans every string of it before the
// node stores it (clean_inventory_strings).
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "common/machine_values.h"
#include "drivers/agent/agent_driver.h"

using nlohmann::json;

TEST_CASE("agent inventory: control characters in firmware strings are cleaned everywhere, lengths bounded") {
  json inv = {{"cpu", {{"model", "Xeon\n\x1b[2J"}}},
              {"memory", {{"dimms", {{{"serial", "S1\r\nProxyCommand x"}, {"part", std::string(2000, 'p')}}}}}},
              {"disks", {{{"name", "nvme0n1"}, {"model", "SAMSUNG\tMZ\xe2\x80\xae"}}}},
              {"nics", {{{"name", "enp65s0f1np1"}, {"mac", "52:54:00:00:00:01"}, {"driver", "mlx5\n_core"}}}},
              {"boot_mode", "uefi"},
              {"hypervisor", json::object()},
              {"count", 3}};
  REQUIRE(kiln::check_inventory(inv));
  kiln::clean_inventory_strings(inv);
  CHECK(inv["cpu"]["model"] == "Xeon [2J");  // the newline became a space, the ESC went
  CHECK(inv["memory"]["dimms"][0]["serial"] == "S1 ProxyCommand x");
  CHECK(inv["memory"]["dimms"][0]["part"].get<std::string>().size() == kiln::kMaxInventoryText);
  CHECK(inv["disks"][0]["model"] == "SAMSUNG MZ");
  CHECK(inv["nics"][0]["name"] == "enp65s0f1np1");
  CHECK(inv["nics"][0]["driver"] == "mlx5 _core");
  CHECK(inv["nics"][0]["mac"] == "52:54:00:00:00:01");
  CHECK(inv["count"] == 3);
  // Nothing left that a line-oriented reader would split on.
  CHECK(inv.dump().find("\\n") == std::string::npos);
  CHECK(inv.dump().find("\\u001b") == std::string::npos);
}

TEST_CASE("agent inventory: a NIC name that is not an interface name fails the inspection, naming it") {
  auto with_nic = [](json name) {
    return json{{"cpu", json::object()}, {"memory", json::object()}, {"disks", json::array()},
                {"nics", {{{"name", name}, {"mac", "52:54:00:00:00:01"}}}}, {"boot_mode", "uefi"},
                {"hypervisor", json::object()}};
  };
  CHECK(kiln::check_inventory(with_nic("eth0")));
  CHECK(kiln::check_inventory(with_nic("bond0.100")));
  for (const json& bad : {json("eth0\nHost *"), json("eth0 x"), json(""), json("a-sixteen-chars0"), json("et%h0"),
                          json("\xc3\xa9th0"), json(nullptr), json(7)}) {
    INFO(bad.dump());
    kiln::Status s = kiln::check_inventory(with_nic(bad));
    REQUIRE_FALSE(s);
    CHECK_THAT(s.error().message, Catch::Contains("nics/0/name must be an interface name"));
  }
  json no_name = with_nic("eth0");
  no_name["nics"][0].erase("name");
  CHECK_FALSE(kiln::check_inventory(no_name));
  json many = with_nic("eth0");
  for (std::size_t i = 0; i < kiln::kMaxInventoryNics; ++i) many["nics"].push_back(many["nics"][0]);
  kiln::Status s = kiln::check_inventory(many);
  REQUIRE_FALSE(s);
  CHECK_THAT(s.error().message, Catch::Contains("nics has more than"));
}
