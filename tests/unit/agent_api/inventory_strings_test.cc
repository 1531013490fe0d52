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
              {"nics", {{{"name", "eth0\nHost *"}, {"mac", "52:54:00:00:00:01"}}}},
              {"boot_mode", "uefi"},
              {"hypervisor", json::object()},
              {"count", 3}};
  REQUIRE(kiln::check_inventory(inv));
  kiln::clean_inventory_strings(inv);
  CHECK(inv["cpu"]["model"] == "Xeon [2J");  // the newline became a space, the ESC went
  CHECK(inv["memory"]["dimms"][0]["serial"] == "S1 ProxyCommand x");
  CHECK(inv["memory"]["dimms"][0]["part"].get<std::string>().size() == kiln::kMaxInventoryText);
  CHECK(inv["disks"][0]["model"] == "SAMSUNG MZ");
  CHECK(inv["nics"][0]["name"] == "eth0 Host *");
  CHECK(inv["nics"][0]["mac"] == "52:54:00:00:00:01");
  CHECK(inv["count"] == 3);
  // Nothing left that a line-oriented reader would split on.
  CHECK(inv.dump().find("\\n") == std::string::npos);
  CHECK(inv.dump().find("\\u001b") == std::string::npos);
}
