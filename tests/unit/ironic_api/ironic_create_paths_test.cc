// What the real clients hit when creating nodes through the Ironic API
// (found by tests/e2e/ironic-clients): the BMC block a fake-hardware node
// gets. The routing of unversioned paths is in tests/integration/ironic_api.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "controller/ironic/ironic_driver_info.h"
#include "controller/ironic/ironic_node_view.h"

using namespace kiln;
using namespace kiln::ironic;
using nlohmann::json;

TEST_CASE("ironic driver_info: fake-hardware without driver_info gets a BMC address the fake driver accepts") {
  // `baremetal node create --driver fake-hardware` sends no driver_info;
  // Kiln's fake driver refuses an empty address ("/bmc/address: is required").
  for (const json& info : {json(), json::object(), json{{"deploy_kernel", "k"}}}) {
    std::vector<FieldError> errors;
    DriverInfoChange c = read_driver_info("fake-hardware", info, BmcInfo{}, errors);
    CHECK(errors.empty());
    CHECK(c.bmc.driver == "fake");
    CHECK_FALSE(c.bmc.address.empty());
  }
}

TEST_CASE("ironic driver_info: a fake node enrolled through /v1 keeps its BMC address when patched here") {
  BmcInfo before;
  before.driver = "fake";
  before.address = "bmc-acme";
  std::vector<FieldError> errors;
  DriverInfoChange c = read_driver_info("fake-hardware", json{{"x", 1}}, before, errors);
  CHECK(errors.empty());
  CHECK(c.bmc.address == "bmc-acme");
  CHECK(c.stored == json{{"x", 1}});
  // A redfish node turned fake does not keep a redfish URL as its address.
  before.driver = "redfish";
  before.address = "https://10.0.0.1";
  c = read_driver_info("fake-hardware", json(), before, errors);
  CHECK(c.bmc.address == "fake-hardware");
  // And the view shows no key the client did not write.
  Node n;
  n.bmc = c.bmc;
  n.ironic = {{"driver", "fake-hardware"}, {"driver_info", json::object()}};
  CHECK(driver_info_view(n) == json::object());
}

TEST_CASE("ironic node view: instance_info.configdrive reads back as the mask, the rest as written") {
  Node n;
  n.id = "6f1c0c8e-3a77-4d7e-9c39-4c1b0b9a2f10";
  n.bmc.driver = "fake";
  n.ironic = {{"instance_info", {{"image_source", "demo-os"},
                                 {"configdrive", {{"user_data", "#cloud-config\npassword: hunter2\n"}}}}}};
  json view = node_view(n, NodeViewOptions{kMaxVersion, "http://k/ironic", true, std::nullopt});
  CHECK(view["instance_info"] == json{{"image_source", "demo-os"}, {"configdrive", "******"}});
  CHECK(view.dump().find("hunter2") == std::string::npos);
  // Without a drive nothing is added.
  n.ironic = {{"instance_info", {{"image_source", "demo-os"}}}};
  CHECK(node_view(n, NodeViewOptions{kMaxVersion, "", true, std::nullopt})["instance_info"] == json{{"image_source", "demo-os"}});
}
