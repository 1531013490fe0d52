#include <catch2/catch.hpp>

#include "drivers/redfish/boot.h"
#include "drivers/redfish/discovery.h"
#include "drivers/redfish/errors.h"
#include "drivers/redfish/power.h"
#include "drivers/redfish/redfish_driver.h"

#include <boost/asio/io_context.hpp>

using namespace kiln;
using namespace kiln::redfish;
using nlohmann::json;

namespace {

SystemCandidate candidate(const std::string& uri, json resource) {
  SystemCandidate c;
  c.uri = uri;
  c.resource = std::move(resource);
  return c;
}

}  // namespace

TEST_CASE("host system: the HGX baseboard is never picked over the host", "[discovery]") {
  std::vector<SystemCandidate> c;
  c.push_back(candidate("/redfish/v1/Systems/HGX_Baseboard_0",
                        json{{"Id", "HGX_Baseboard_0"}, {"SystemType", "Physical"},
                             {"ProcessorSummary", {{"Count", 8}}}}));
  c.push_back(candidate("/redfish/v1/Systems/System_0",
                        json{{"Id", "System_0"}, {"SystemType", "Physical"},
                             {"ProcessorSummary", {{"Count", 2}}},
                             {"Actions", {{"#ComputerSystem.Reset", {{"target", "x"}}}}}}));
  auto r = select_host_system(c, "");
  REQUIRE(r);
  CHECK(*r == 1);
}

TEST_CASE("host system: SystemType Physical with CPUs beats a virtual or DPU system", "[discovery]") {
  std::vector<SystemCandidate> c;
  c.push_back(candidate("/redfish/v1/Systems/bf3", json{{"Id", "bf3"}, {"SystemType", "DPU"}}));
  c.push_back(candidate("/redfish/v1/Systems/1", json{{"Id", "1"}, {"SystemType", "Physical"},
                                                      {"ProcessorSummary", {{"Count", 2}}}}));
  auto r = select_host_system(c, "");
  REQUIRE(r);
  CHECK(*r == 1);
}

TEST_CASE("host system: system_id matches Id, URI segment, URI or Name, else kNotFound", "[discovery]") {
  std::vector<SystemCandidate> c;
  c.push_back(candidate("/redfish/v1/Systems/a", json{{"Id", "a"}, {"Name", "alpha"}}));
  c.push_back(candidate("/redfish/v1/Systems/b", json{{"Id", "b"}, {"Name", "beta"}}));
  CHECK(*select_host_system(c, "b") == 1);
  CHECK(*select_host_system(c, "/redfish/v1/Systems/b") == 1);
  CHECK(*select_host_system(c, "beta") == 1);
  auto missing = select_host_system(c, "zeta");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Code::kNotFound);
  CHECK_THAT(missing.error().message, Catch::Contains("a, b"));
  std::vector<SystemCandidate> none;
  CHECK_FALSE(select_host_system(none, ""));
}

TEST_CASE("collections: members and nextLink", "[discovery]") {
  json page = {{"Members", {{{"@odata.id", "/a"}}, {{"@odata.id", "/b"}}, {{"bogus", 1}}}},
               {"Members@odata.nextLink", "/coll?$skip=2"}};
  CHECK(member_uris(page) == std::vector<std::string>{"/a", "/b"});
  CHECK(next_link(page) == "/coll?$skip=2");
  CHECK(next_link(json{{"Members", json::array()}}).empty());
  CHECK(link_of(json{{"Links", {{"Sessions", {{"@odata.id", "/s"}}}}}}, "Links", "Sessions") == "/s");
}

TEST_CASE("reset type: chosen from what the BMC allows", "[power]") {
  const std::vector<std::string> all = {"On", "ForceOff", "GracefulShutdown", "ForceRestart",
                                        "GracefulRestart", "PowerCycle"};
  CHECK(*choose_reset_type(PowerAction::kOn, PowerState::kOff, all) == "On");
  CHECK(*choose_reset_type(PowerAction::kOff, PowerState::kOn, all) == "ForceOff");
  CHECK(*choose_reset_type(PowerAction::kSoftOff, PowerState::kOn, all) == "GracefulShutdown");
  CHECK(*choose_reset_type(PowerAction::kReboot, PowerState::kOn, all) == "ForceRestart");
  CHECK(*choose_reset_type(PowerAction::kReboot, PowerState::kOff, all) == "On");
  const std::vector<std::string> cycle_only = {"On", "ForceOff", "PowerCycle"};
  CHECK(*choose_reset_type(PowerAction::kReboot, PowerState::kOn, cycle_only) == "PowerCycle");
  const std::vector<std::string> force_on = {"ForceOn", "ForceOff"};
  CHECK(*choose_reset_type(PowerAction::kOn, PowerState::kOff, force_on) == "ForceOn");
  // Nothing said: the standard values.
  CHECK(*choose_reset_type(PowerAction::kOff, PowerState::kOn, {}) == "ForceOff");

  const std::vector<std::string> no_force = {"On", "GracefulShutdown"};
  auto r = choose_reset_type(PowerAction::kOff, PowerState::kOn, no_force);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == Code::kUnprocessable);
  CHECK_THAT(r.error().message, Catch::Contains("ForceOff") && Catch::Contains("allowed: On, GracefulShutdown"));
}

TEST_CASE("reset type: allowable values from the action, else its ActionInfo", "[power]") {
  json action = {{"target", "/x"}, {"ResetType@Redfish.AllowableValues", {"On", "ForceOff"}}};
  CHECK(allowed_reset_types(action, json()) == std::vector<std::string>{"On", "ForceOff"});
  json bare = {{"target", "/x"}, {"@Redfish.ActionInfo", "/info"}};
  json info = {{"Parameters", {{{"Name", "Other"}, {"AllowableValues", {"x"}}},
                               {{"Name", "ResetType"}, {"AllowableValues", {"On", "PowerCycle"}}}}}};
  CHECK(allowed_reset_types(bare, info) == std::vector<std::string>{"On", "PowerCycle"});
  CHECK(allowed_reset_types(bare, json()).empty());
}

TEST_CASE("power state strings", "[power]") {
  CHECK(parse_redfish_power_state("On") == PowerState::kOn);
  CHECK(parse_redfish_power_state("PoweringOn") == PowerState::kOn);
  CHECK(parse_redfish_power_state("Off") == PowerState::kOff);
  CHECK(parse_redfish_power_state("PoweringOff") == PowerState::kOff);
  CHECK_FALSE(parse_redfish_power_state("Weird"));
}

TEST_CASE("errors: ExtendedInfo messages and ids surface in the Error", "[errors]") {
  json body = {{"error",
                {{"code", "Base.1.8.GeneralError"},
                 {"message", "A general error has occurred."},
                 {"@Message.ExtendedInfo",
                  {{{"MessageId", "Base.1.8.PropertyValueNotInList"},
                    {"Message", "The value 'Floppy' for BootSourceOverrideTarget is not allowed."}},
                   {{"MessageId", "Base.1.8.PropertyMissing"}}}}}}};
  auto m = extract_messages(body);
  REQUIRE(m.size() == 2);
  CHECK(describe_messages(m) ==
        "The value 'Floppy' for BootSourceOverrideTarget is not allowed. (Base.1.8.PropertyValueNotInList); "
        "Base.1.8.PropertyMissing");
  Error e = http_error("PATCH /redfish/v1/Systems/1", 400, body);
  CHECK(e.code == Code::kDriverError);
  CHECK_THAT(e.message, Catch::Contains("HTTP 400") && Catch::Contains("Floppy"));

  // Only error.code/message.
  json plain = {{"error", {{"code", "Oem.Busy"}, {"message", "BMC busy"}}}};
  CHECK(describe_messages(extract_messages(plain)) == "BMC busy (Oem.Busy)");
  // ExtendedInfo at the top level.
  json top = {{"@Message.ExtendedInfo", {{{"MessageId", "X.1"}, {"Message", "top"}}}}};
  CHECK(describe_messages(extract_messages(top)) == "top (X.1)");
  CHECK(extract_messages(json("<html>")).empty());
  // A BMC's words are hostile text: cleaned and bounded where they enter.
  json hostile = {{"error", {{"code", "X\n\x1b[2J"}, {"message", "bad\r\nProxyCommand x" + std::string(5000, 'm')}}}};
  std::string said = describe_messages(extract_messages(hostile));
  CHECK(said.find('\n') == std::string::npos);
  CHECK(said.find('\x1b') == std::string::npos);
  CHECK(said.find("bad ProxyCommand x") == 0);
  CHECK(said.size() < 1100);

  CHECK(http_error("GET /", 401, json()).code == Code::kUnauthenticated);
  CHECK(http_error("GET /", 404, json()).code == Code::kNotFound);
  CHECK(http_error("GET /", 412, json()).code == Code::kPreconditionFailed);
  CHECK(http_error("GET /", 503, json()).code == Code::kDriverError);
}

TEST_CASE("boot: ETag ladder and the PATCH target", "[boot]") {
  CHECK(strong_etag("W/\"abc\"") == "\"abc\"");
  CHECK(strong_etag("\"abc\"") == "\"abc\"");
  CHECK(if_match_ladder("W/\"abc\"") == std::vector<std::string>{"W/\"abc\"", "\"abc\"", ""});
  CHECK(if_match_ladder("\"abc\"") == std::vector<std::string>{"\"abc\"", ""});
  CHECK(if_match_ladder("") == std::vector<std::string>{""});

  json with_settings = {{"@Redfish.Settings", {{"SettingsObject", {{"@odata.id", "/redfish/v1/Systems/1/Settings"}}}}}};
  CHECK(boot_patch_uri("/redfish/v1/Systems/1", with_settings) == "/redfish/v1/Systems/1/Settings");
  CHECK(boot_patch_uri("/redfish/v1/Systems/1", json::object()) == "/redfish/v1/Systems/1");
}

TEST_CASE("boot: request carries all three properties and checks allowed targets", "[boot]") {
  json sys = {{"Boot",
               {{"BootSourceOverrideTarget", "None"},
                {"BootSourceOverrideMode", "UEFI"},
                {"BootSourceOverrideTarget@Redfish.AllowableValues", {"None", "Pxe", "Hdd"}}}}};
  auto r = make_boot_request(sys, BootDevice::kPxe, false, "uefi", "Pxe");
  REQUIRE(r);
  json body = boot_patch_body(*r);
  CHECK(body["Boot"]["BootSourceOverrideTarget"] == "Pxe");
  CHECK(body["Boot"]["BootSourceOverrideEnabled"] == "Once");
  CHECK(body["Boot"]["BootSourceOverrideMode"] == "UEFI");
  auto legacy = make_boot_request(sys, BootDevice::kDisk, true, "bios", "Pxe");
  REQUIRE(legacy);
  CHECK(legacy->target == "Hdd");
  CHECK(legacy->enabled == "Continuous");
  CHECK(legacy->mode == "Legacy");

  auto http_boot = make_boot_request(sys, BootDevice::kPxe, false, "uefi", "UefiHttp");
  REQUIRE_FALSE(http_boot);
  CHECK(http_boot.error().code == Code::kUnprocessable);
  CHECK_THAT(http_boot.error().message, Catch::Contains("allowed: None, Pxe, Hdd"));

  json no_mode = {{"Boot", {{"BootSourceOverrideTarget", "None"}}}};
  auto nm = make_boot_request(no_mode, BootDevice::kPxe, false, "uefi", "Pxe");
  REQUIRE(nm);
  CHECK_FALSE(boot_patch_body(*nm)["Boot"].contains("BootSourceOverrideMode"));
  CHECK_FALSE(make_boot_request(json::object(), BootDevice::kPxe, false, "uefi", "Pxe"));

  json applied = {{"Boot", {{"BootSourceOverrideTarget", "Pxe"}, {"BootSourceOverrideEnabled", "Once"},
                            {"BootSourceOverrideMode", "UEFI"}}}};
  CHECK(boot_matches(applied, *r));
  CHECK_FALSE(boot_matches(applied, *legacy));
}

TEST_CASE("bmc.address with credentials is refused naming /bmc/address, without echoing the address",
          "[validate]") {
  boost::asio::io_context io;
  auto driver = make_redfish_driver(io.get_executor(), RedfishDriverOptions{}, Logger(LogLevel::kOff));
  const std::string secret = "redfish-secret-pw";
  for (const std::string& address :
       {"https://admin:" + secret + "@10.0.0.1", "admin:" + secret + "@10.0.0.1:8443", "https://" + secret + "@bmc"}) {
    BmcInfo bmc;
    bmc.driver = "redfish";
    bmc.address = address;
    bmc.username = "root";
    Status s = driver->power->validate(bmc);
    INFO(address);
    REQUIRE_FALSE(s);
    REQUIRE(s.error().fields.size() == 1);
    CHECK(s.error().fields[0].field == "/bmc/address");
    CHECK(s.error().message.find(secret) == std::string::npos);
    CHECK(s.error().fields[0].message.find(secret) == std::string::npos);
    Status m = driver->management->validate(bmc);
    REQUIRE_FALSE(m);
    CHECK(m.error().message.find(secret) == std::string::npos);
  }
  // Other parse failures keep their reason but not the address either.
  BmcInfo bad;
  bad.driver = "redfish";
  bad.address = "https://bmc-name-xyz:99999999";
  bad.username = "root";
  Status s = driver->power->validate(bad);
  REQUIRE_FALSE(s);
  CHECK(s.error().message.find("bad port") != std::string::npos);
  CHECK(s.error().message.find("bmc-name-xyz") == std::string::npos);
}
