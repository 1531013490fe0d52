// JSON Patch, driver_info mapping and the node view of the Ironic API.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "controller/ironic/ironic_driver_info.h"
#include "controller/ironic/ironic_node_view.h"
#include "controller/ironic/ironic_patch.h"

using namespace kiln;
using namespace kiln::ironic;
using nlohmann::json;

TEST_CASE("ironic patch: add, replace and remove on nested paths") {
  json doc = {{"driver_info", {{"redfish_address", "https://a"}}}, {"extra", {{"a", {{"b", 1}}}}}, {"maintenance", false}};
  json patch = json::array({{{"op", "add"}, {"path", "/driver_info/redfish_system_id"}, {"value", "/redfish/v1/Systems/1"}},
                            {{"op", "replace"}, {"path", "/driver_info/redfish_address"}, {"value", "https://b"}},
                            {{"op", "remove"}, {"path", "/extra/a/b"}},
                            {{"op", "add"}, {"path", "/extra/x~1y"}, {"value", {1, 2}}},
                            {{"op", "add"}, {"path", "/extra/x~1y/-"}, {"value", 3}},
                            {{"op", "replace"}, {"path", "/maintenance"}, {"value", "true"}}});
  REQUIRE(apply_json_patch(doc, patch));
  CHECK(doc["driver_info"]["redfish_system_id"] == "/redfish/v1/Systems/1");
  CHECK(doc["driver_info"]["redfish_address"] == "https://b");
  CHECK(doc["extra"]["a"] == json::object());
  CHECK(doc["extra"]["x/y"] == json({1, 2, 3}));
  CHECK(doc["maintenance"] == "true");  // the node reader takes Ironic's boolean strings
}

TEST_CASE("ironic patch: refusals name the operation and leave the document untouched") {
  const json original = {{"extra", {{"k", "v"}}}};
  struct Case {
    json patch;
    std::string field;
  };
  for (const Case& c : std::vector<Case>{
           {json::object(), ""},
           {json::array(), ""},
           {json::array({{{"op", "move"}, {"path", "/extra/k"}, {"from", "/extra/j"}}}), "/0/from"},
           {json::array({{{"op", "test"}, {"path", "/extra/k"}, {"value", "v"}}}), "/0/op"},
           {json::array({{{"op", "replace"}, {"path", "/extra/missing"}, {"value", 1}}}), "/0/path"},
           {json::array({{{"op", "remove"}, {"path", "/extra/missing"}}}), "/0/path"},
           {json::array({{{"op", "add"}, {"path", "/nope/deeper"}, {"value", 1}}}), "/0/path"},
           {json::array({{{"op", "add"}, {"path", "extra"}, {"value", 1}}}), "/0/path"},
           {json::array({{{"op", "add"}, {"path", "/extra/~2"}, {"value", 1}}}), "/0/path"},
           {json::array({{{"op", "add"}, {"path", "/extra/k"}}}), "/0/value"},
           {json::array({{{"op", "add"}, {"path", "/extra/a"}, {"value", 1}}, {{"op", "remove"}, {"path", "/x"}}}), "/1/path"},
       }) {
    CAPTURE(c.patch.dump());
    json doc = original;
    Status s = apply_json_patch(doc, c.patch);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == Code::kInvalidArgument);
    REQUIRE_FALSE(s.error().fields.empty());
    CHECK(s.error().fields.front().field == c.field);
    CHECK(doc == original);
  }
}

TEST_CASE("ironic patch: bounded") {
  json doc = json::object();
  json many = json::array();
  for (std::size_t i = 0; i <= kMaxPatchOps; ++i) many.push_back({{"op", "add"}, {"path", "/a"}, {"value", 1}});
  CHECK_FALSE(apply_json_patch(doc, many));
  std::string deep;
  for (std::size_t i = 0; i <= kMaxPathDepth; ++i) deep += "/a";
  CHECK_FALSE(parse_pointer(deep));
}

TEST_CASE("ironic driver_info: redfish keys map onto the BMC block, the password only sealed") {
  std::vector<FieldError> errors;
  json di = {{"redfish_address", "https://10.0.0.5:8000"}, {"redfish_username", "admin"},
             {"redfish_password", "s3cret"}, {"redfish_system_id", "/redfish/v1/Systems/1"},
             {"redfish_verify_ca", "False"}, {"deploy_kernel", "http://x/k"}};
  DriverInfoChange c = read_driver_info("redfish", di, BmcInfo{}, errors);
  CHECK(errors.empty());
  CHECK(c.bmc.driver == "redfish");
  CHECK(c.bmc.address == "https://10.0.0.5:8000");
  CHECK(c.bmc.username == "admin");
  CHECK(c.bmc.system_id == "/redfish/v1/Systems/1");
  CHECK_FALSE(c.bmc.verify_tls);
  REQUIRE(c.password);
  CHECK(*c.password == "s3cret");
  CHECK_FALSE(c.stored.contains("redfish_password"));
  CHECK(c.stored.dump().find("s3cret") == std::string::npos);
  CHECK(c.stored["redfish_verify_ca"] == "False");  // read back as written

  Node n;
  n.bmc = c.bmc;
  n.bmc.password_sealed = "sealed";
  n.ironic = {{"driver", "redfish"}, {"driver_info", c.stored}};
  json view = driver_info_view(n);
  CHECK(view["redfish_password"] == "******");
  CHECK(view["redfish_verify_ca"] == "False");
  CHECK(view["deploy_kernel"] == "http://x/k");
  CHECK(view["redfish_address"] == "https://10.0.0.5:8000");

  // The mask written back keeps the password.
  json again = view;
  DriverInfoChange keep = read_driver_info("redfish", again, n.bmc, errors);
  CHECK_FALSE(keep.password);
  CHECK_FALSE(keep.password_clear);
}

TEST_CASE("ironic driver_info: ipmi address and port, secret keys refused") {
  std::vector<FieldError> errors;
  DriverInfoChange c = read_driver_info("ipmi", {{"ipmi_address", "10.0.0.9"}, {"ipmi_port", "6230"}}, BmcInfo{}, errors);
  CHECK(errors.empty());
  CHECK(c.bmc.address == "10.0.0.9:6230");
  CHECK(c.stored["ipmi_port"] == "6230");
  errors.clear();
  read_driver_info("ipmi", {{"ipmi_address", "10.0.0.9"}, {"ipmi_port", 70000}}, BmcInfo{}, errors);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].field == "/driver_info/ipmi_port");
  errors.clear();
  read_driver_info("redfish", {{"redfish_address", "https://a"}, {"snmp_auth_key", "k"}, {"ipmi_password", "p"}},
                   BmcInfo{}, errors);
  CHECK(errors.size() == 2);
  errors.clear();
  read_driver_info("redfish", {{"redfish_username", "u"}}, BmcInfo{}, errors);
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].field == "/driver_info/redfish_address");
}

TEST_CASE("ironic driver_info: a BMC changed through /v1 shows, not the stale key") {
  Node n;
  n.bmc.driver = "redfish";
  n.bmc.address = "https://new";
  n.ironic = {{"driver", "redfish"}, {"driver_info", {{"redfish_address", "https://old"}, {"x", 1}}}};
  json view = driver_info_view(n);
  CHECK(view["redfish_address"] == "https://new");
  CHECK(view["x"] == 1);
  CHECK(driver_info_field("redfish", "/bmc/address") == "/driver_info/redfish_address");
  CHECK(driver_info_field("ipmi", "/bmc/username") == "/driver_info/ipmi_username");
}

TEST_CASE("ironic node view: types clients decode, links, version-gated fields") {
  Node n;
  n.id = "3f2a6a64-3a57-4c8e-9d1f-2a0c4b7c1e11";
  n.name = "n1";
  n.bmc.driver = "fake";
  n.created_at = 1'700'000'000'123;
  n.updated_at = 0;
  NodeViewOptions latest{kMaxVersion, "http://h/ironic", true, std::nullopt};
  json v = node_view(n, latest);
  CHECK(v["uuid"] == n.id);
  CHECK(v["driver"] == "fake-hardware");
  CHECK(v["maintenance"].is_boolean());
  CHECK(v["extra"].is_object());
  CHECK(v["properties"].is_object());
  CHECK(v["instance_info"].is_object());
  CHECK(v["driver_internal_info"].is_object());
  CHECK(v["instance_uuid"].is_null());
  CHECK(v["created_at"] == "2023-11-14T22:13:20.123000+00:00");
  CHECK(v["updated_at"].is_null());
  CHECK(v["provision_state"] == "enroll");
  CHECK(v["target_provision_state"].is_null());
  CHECK(v["traits"].is_array());
  CHECK(v["links"][0]["href"] == "http://h/ironic/v1/nodes/" + n.id);
  CHECK(v["links"][1]["rel"] == "bookmark");

  json old = node_view(n, NodeViewOptions{ApiVersion{1, 1}, "http://h/ironic", true, std::nullopt});
  CHECK_FALSE(old.contains("name"));       // 1.5
  CHECK_FALSE(old.contains("traits"));     // 1.37
  CHECK_FALSE(old.contains("owner"));      // 1.50
  CHECK(old["provision_state"] == "enroll");

  json list = node_view(n, NodeViewOptions{kMaxVersion, "http://h/ironic", false, std::nullopt});
  CHECK(list.size() == 7);  // uuid name instance_uuid power_state provision_state maintenance links
}

TEST_CASE("ironic node fields: unknown 400, newer than the version 406") {
  auto ok = parse_node_fields("uuid,name,driver_info", kMaxVersion);
  REQUIRE(std::holds_alternative<std::set<std::string>>(ok));
  auto unknown = parse_node_fields("uuid,bogus", kMaxVersion);
  REQUIRE(std::holds_alternative<FieldsRefusal>(unknown));
  CHECK(std::get<FieldsRefusal>(unknown).status == 400);
  auto newer = parse_node_fields("traits", ApiVersion{1, 30});
  REQUIRE(std::holds_alternative<FieldsRefusal>(newer));
  CHECK(std::get<FieldsRefusal>(newer).status == 406);
}
