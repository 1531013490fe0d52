// The bodies of Ironic's provision, power and maintenance requests: every
// target, the refusals Ironic's API gives (status and a message naming the
// field), and a configdrive object turned into Kiln's config drive parts.
#include <catch2/catch.hpp>

#include <string>

#include "controller/ironic/ironic_provision_request.h"

using namespace kiln;
using namespace kiln::ironic;
using nlohmann::json;
using E = ProvisionEvent;

namespace {

const std::string kKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq9kx1f7pZ8bC4oTb0FvZ7yJb1m2cQ7dWq8p0JqGq1a alice@lab";

std::optional<ProvisionRequest> parse(const json& body, int minor, Refusal& why) {
  return parse_provision_request(body, minor, why);
}

// The refusal of `body` at `minor`: its status, and that the message holds `needle`.
void refused(const json& body, int minor, int status, const std::string& needle) {
  Refusal why;
  INFO(body.dump() << " at 1." << minor);
  REQUIRE_FALSE(parse(body, minor, why).has_value());
  CHECK(why.status == status);
  INFO(why.message);
  CHECK(why.message.find(needle) != std::string::npos);
}

}  // namespace

TEST_CASE("every target Kiln runs maps onto its engine's verb") {
  const std::pair<const char*, E> targets[] = {
      {"manage", E::kManage},   {"provide", E::kProvide},    {"inspect", E::kInspect},
      {"active", E::kDeploy},   {"deploy", E::kDeploy},      {"deleted", E::kUndeploy},
      {"undeploy", E::kUndeploy}, {"abort", E::kAbort},
  };
  for (auto [target, verb] : targets) {
    Refusal why;
    auto r = parse({{"target", target}}, 89, why);
    INFO(target << ": " << why.message);
    REQUIRE(r.has_value());
    CHECK(r->verb == verb);
    CHECK(r->target == target);
    CHECK_FALSE(r->configdrive.has_value());
  }
}

TEST_CASE("verbs newer than the request's microversion are 406, as Ironic gates them") {
  refused({{"target", "manage"}}, 3, 406, "\"manage\"");
  refused({{"target", "inspect"}}, 5, 406, "1.6");
  refused({{"target", "abort"}}, 12, 406, "1.13");
  refused({{"target", "deploy"}}, 72, 406, "1.73");
  Refusal why;
  CHECK(parse({{"target", "active"}}, 1, why).has_value());  // "active" has no gate
  CHECK(parse({{"target", "deleted"}}, 1, why).has_value());
}

TEST_CASE("targets Kiln does not run, and unknown ones, are 400") {
  refused({{"target", "rebuild"}}, 89, 400, "not supported by Kiln");
  refused({{"target", "rescue"}, {"rescue_password", "x"}}, 89, 400, "rescue");
  refused({{"target", "unrescue"}}, 89, 400, "not supported by Kiln");
  refused({{"target", "adopt"}}, 89, 400, "not supported by Kiln");
  refused({{"target", "fly"}}, 89, 400, "\"fly\" could not be understood");
  refused({{"target", 3}}, 89, 400, "target is required");
  refused(json::object(), 89, 400, "target is required");
  refused(json::array(), 89, 400, "must be a JSON object");
  refused({{"target", "manage"}, {"colour", "red"}}, 89, 400, "\"colour\"");
}

TEST_CASE("clean: steps checked, the unknown one named, and no manual cleaning") {
  refused({{"target", "clean"}}, 89, 400, "\"clean_steps\" is required");
  refused({{"target", "clean"}, {"clean_steps", json::array()}}, 89, 400, "\"clean_steps\" is required");
  refused({{"target", "clean"}, {"clean_steps", "erase"}}, 89, 400, "clean_steps must be an array");
  refused({{"target", "clean"}, {"clean_steps", {{{"step", "erase_devices"}}}}}, 89, 400, "clean_steps/0/interface");
  refused({{"target", "clean"}, {"clean_steps", {{{"interface", "deploy"}}}}}, 89, 400, "clean_steps/0/step");
  refused({{"target", "clean"}, {"clean_steps", {{{"interface", "disk"}, {"step", "x"}}}}}, 89, 400,
          "clean_steps/0/interface must be one of");
  refused({{"target", "clean"},
           {"clean_steps", {{{"interface", "deploy"}, {"step", "erase_devices"}},
                            {{"interface", "raid"}, {"step", "create_configuration"}}}}},
          89, 400, "clean_steps/1/step: Kiln has no clean step raid.create_configuration");
  refused({{"target", "clean"}, {"clean_steps", {{{"interface", "deploy"}, {"step", "erase_devices"}, {"args", 1}}}}},
          89, 400, "clean_steps/0/args must be an object");
  refused({{"target", "clean"}, {"clean_steps", {{{"interface", "deploy"}, {"step", "erase_devices"}}}}}, 89, 400,
          "use target \"provide\"");
  refused({{"target", "clean"}, {"clean_steps", {{{"interface", "deploy"}, {"step", "erase_devices"}}}}}, 14, 406,
          "1.15");
}

TEST_CASE("fields for another target, or of the wrong type, are 400") {
  refused({{"target", "provide"}, {"clean_steps", {{{"interface", "deploy"}, {"step", "erase_devices"}}}}}, 89, 400,
          "only valid when setting target provision state to clean");
  refused({{"target", "active"}, {"deploy_steps", {{{"interface", "deploy"}}}}}, 89, 400, "deploy_steps");
  refused({{"target", "manage"}, {"deploy_steps", 4}}, 89, 400, "deploy_steps must be an array");
  refused({{"target", "active"}, {"rescue_password", "pw"}}, 89, 400, "rescue_password");
  refused({{"target", "active"}, {"disable_ramdisk", "yes"}}, 89, 400, "disable_ramdisk must be a boolean");
  refused({{"target", "manage"}, {"configdrive", {{"user_data", "x"}}}}, 89, 400,
          "only supported when setting provision state to active");
  Refusal why;
  CHECK(parse({{"target", "active"}, {"deploy_steps", json::array()}, {"configdrive", nullptr}}, 89, why));
}

TEST_CASE("a configdrive object becomes the config drive's parts") {
  Refusal why;
  json body = {{"target", "active"},
               {"configdrive",
                {{"meta_data", {{"public_keys", {{"alice", kKey}}}, {"uuid", "abc"}, {"local-hostname", "web-1"}}},
                 {"user_data", "#cloud-config\npackages: [htop]\n"},
                 {"network_data", {{"links", json::array()}, {"networks", json::array()}, {"services", json::array()}}}}}};
  auto r = parse(body, 89, why);
  INFO(why.message);
  REQUIRE(r.has_value());
  REQUIRE(r->configdrive.has_value());
  CHECK(r->configdrive->ssh_keys == std::vector<std::string>{kKey});
  CHECK(r->configdrive->hostname == "web-1");
  CHECK(r->configdrive->user_data == "#cloud-config\npackages: [htop]\n");

  // user_data as an object or array is its JSON text, as Ironic writes it.
  auto obj = parse_configdrive({{"user_data", {{"a", 1}}}}, 89, why);
  REQUIRE(obj.has_value());
  CHECK(obj->user_data == "{\"a\":1}");
  // Metal3's meta_data: names Kiln has no place for are accepted.
  auto metal3 = parse_configdrive(
      {{"meta_data", {{"uuid", "u"}, {"metal3-namespace", "ns"}, {"metal3-name", "h"}, {"name", "host-0"}}}}, 89, why);
  REQUIRE(metal3.has_value());
  CHECK(metal3->hostname == "host-0");
}

TEST_CASE("bad configdrive input is 400 naming the field") {
  auto bad = [](const json& cd, int minor, const std::string& needle) {
    Refusal why;
    INFO(cd.dump());
    REQUIRE_FALSE(parse_configdrive(cd, minor, why).has_value());
    CHECK(why.status == 400);
    INFO(why.message);
    CHECK(why.message.find(needle) != std::string::npos);
  };
  bad("H4sIAAAAAAAAA+3OMQ6CQBCF4a1", 89, "prebuilt config drive");
  bad("https://example.com/cd.iso.gz", 89, "prebuilt config drive");
  bad(42, 89, "configdrive must be an object or a string");
  bad({{"user_data", "x"}}, 55, "1.56");
  bad({{"meta_data", "x"}}, 89, "configdrive/meta_data must be an object");
  bad({{"meta_data", {{"public_keys", {"k"}}}}}, 89, "configdrive/meta_data/public_keys must be an object");
  bad({{"meta_data", {{"public_keys", {{"bob", 7}}}}}}, 89, "configdrive/meta_data/public_keys/bob must be a string");
  bad({{"meta_data", {{"public_keys", {{"bob", "ssh-ed25519 AAAA"}}}}}}, 89, "configdrive/meta_data/public_keys/bob");
  bad({{"meta_data", {{"hostname", "not a host!"}}}}, 89, "configdrive/meta_data/hostname");
  bad({{"meta_data", {{"hostname", 3}}}}, 89, "configdrive/meta_data/hostname");
  bad({{"user_data", 3}}, 89, "configdrive/user_data must be");
  bad({{"user_data", std::string(kMaxUserDataBytes + 1, 'x')}}, 89, "configdrive/user_data: at most");
  bad({{"network_data", {{"links", {{{"id", "eth0"}, {"type", "phy"}}}}}}}, 89, "configdrive/network_data is not supported");
  bad({{"network_data", "x"}}, 89, "configdrive/network_data must be an object");
  bad({{"vendor_data", {{"a", 1}}}}, 58, "1.59");
  bad({{"vendor_data", {{"a", 1}}}}, 89, "configdrive/vendor_data is not supported");
  bad({{"extra", 1}}, 89, "configdrive: unknown field \"extra\"");
  json many = json::object();
  for (size_t i = 0; i <= kMaxPublicKeys; ++i) many["k" + std::to_string(i)] = kKey;
  bad({{"meta_data", {{"public_keys", many}}}}, 89, "at most");
}

TEST_CASE("instance_info image_source names a Kiln image, never a URL") {
  Refusal why;
  CHECK(deploy_image({{"image_source", "demo-os"}}, why) == std::optional<std::string>("demo-os"));
  CHECK(deploy_image({{"image_source", "5b6c1b0e-8a9c-4b7e-9a43-6f2f0f1d2c3b"}}, why).has_value());
  for (json info : {json(), json::object(), json({{"image_source", ""}}), json({{"image_source", 5}})}) {
    CHECK_FALSE(deploy_image(info, why).has_value());
    CHECK(why.status == 400);
    CHECK(why.message.find("instance_info/image_source is required") != std::string::npos);
  }
  CHECK_FALSE(deploy_image({{"image_source", "http://images.example/os.qcow2"}}, why).has_value());
  CHECK(why.status == 400);
  CHECK(why.message.find("register the image with Kiln first") != std::string::npos);
  CHECK_FALSE(deploy_image({{"image_source", std::string(256, 'a')}}, why).has_value());
}

TEST_CASE("power targets") {
  const std::pair<const char*, PowerAction> ok[] = {{"power on", PowerAction::kOn},
                                                     {"power off", PowerAction::kOff},
                                                     {"rebooting", PowerAction::kReboot},
                                                     {"soft power off", PowerAction::kSoftOff}};
  for (auto [target, action] : ok) {
    Refusal why;
    auto r = parse_power_request({{"target", target}}, 89, why);
    INFO(target << ": " << why.message);
    REQUIRE(r.has_value());
    CHECK(r->action == action);
  }
  Refusal why;
  auto t = parse_power_request({{"target", "power off"}, {"timeout", 30}}, 89, why);
  REQUIRE(t.has_value());
  CHECK(t->timeout == std::optional<int64_t>(30));

  auto bad = [](const json& body, int minor, int status, const std::string& needle) {
    Refusal why;
    INFO(body.dump());
    REQUIRE_FALSE(parse_power_request(body, minor, why).has_value());
    CHECK(why.status == status);
    INFO(why.message);
    CHECK(why.message.find(needle) != std::string::npos);
  };
  bad({{"target", "soft rebooting"}}, 89, 400, "soft rebooting");
  bad({{"target", "on"}}, 89, 400, "Invalid state \"on\"");
  bad({{"target", "power off"}, {"timeout", 0}}, 89, 400, "timeout has to be positive integer");
  bad({{"target", "power off"}, {"timeout", "5"}}, 89, 400, "timeout");
  bad({{"target", "soft power off"}}, 26, 406, "1.27");
  bad({{"target", "power off"}, {"timeout", 5}}, 26, 406, "1.27");
  bad({{"target", "power off"}, {"force", true}}, 89, 400, "\"force\"");
  bad(json::object(), 89, 400, "target is required");
}

TEST_CASE("maintenance reason") {
  Refusal why;
  CHECK(parse_maintenance_reason(json(), why) == std::optional<std::string>(""));
  CHECK(parse_maintenance_reason({{"reason", "disk swap"}}, why) == std::optional<std::string>("disk swap"));
  CHECK_FALSE(parse_maintenance_reason({{"reason", 3}}, why).has_value());
  CHECK(why.message.find("reason must be a string") != std::string::npos);
  CHECK_FALSE(parse_maintenance_reason({{"reason", std::string(1025, 'r')}}, why).has_value());
  CHECK_FALSE(parse_maintenance_reason({{"why", "x"}}, why).has_value());
}

TEST_CASE("the deploy's configdrive kept in instance_info is what the conductor writes") {
  Node n;
  CHECK_FALSE(own_config_drive(n).has_value());
  n.ironic = {{"instance_info", {{"image_source", "demo-os"}}}};
  CHECK_FALSE(own_config_drive(n).has_value());
  n.ironic["instance_info"]["configdrive"] = {{"meta_data", {{"public_keys", {{"a", kKey}}}, {"hostname", "web-2"}}},
                                              {"user_data", "#cloud-config\n"}};
  auto cd = own_config_drive(n);
  REQUIRE(cd.has_value());
  CHECK(cd->access.ssh_keys == std::vector<std::string>{kKey});
  CHECK(cd->access.user_data == "#cloud-config\n");
  CHECK(cd->hostname == "web-2");
  // One that no longer parses (edited by hand through PATCH) is none, never half of one.
  n.ironic["instance_info"]["configdrive"]["meta_data"]["public_keys"]["a"] = "ssh-ed25519 AAAA";
  CHECK_FALSE(own_config_drive(n).has_value());
}
