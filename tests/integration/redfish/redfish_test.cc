// The Redfish driver against kiln-vbmc (a real HTTPS Redfish service in a
// child process): libvirt's test:///default, the captured BMC trees, and the
// failure paths kiln-vbmc injects. What the driver changed is confirmed by a
// second client doing plain HTTPS GETs against kiln-vbmc (each process that
// opens test:///default gets its own private state, so libvirt in this
// process would not see kiln-vbmc's changes).

#include <utility>  // before Asio

#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include "tests/support/skip.h"
#include <nlohmann/json.hpp>

#include "common/crypto.h"
#include "drivers/redfish/redfish_driver.h"
#include "tests/integration/redfish/driver_harness.h"
#include "tests/integration/redfish/vbmc_process.h"
#include "tests/support/http_test_client.h"

namespace {

using namespace kiln;
using nlohmann::json;
using testing::DriverHarness;
using testing::fast_options;
using testing::kPassword;
using testing::kUser;
using testing::vbmc_args;
using testing::VbmcProcess;
namespace asio = boost::asio;

const std::string kFixtures = KILN_REDFISH_FIXTURES;

bool have_fixtures() { return std::filesystem::exists(kFixtures + "/supermicro-hgx-h100"); }

// The independent observer: plain HTTPS GETs with Basic auth.
struct Observer {
  testing::HttpTestClient client;
  testing::Headers auth;
  explicit Observer(const VbmcProcess& v) : client("127.0.0.1", v.port(), true) {
    auth["Authorization"] = "Basic " + base64_encode(kUser + ":" + kPassword);
  }
  testing::TestResponse raw(const std::string& method, const std::string& path, const std::string& body = {},
                            testing::Headers extra = {}) {
    testing::Headers h = auth;
    for (const auto& kv : extra) h[kv.first] = kv.second;
    return client.request(method, path, body, h);
  }
  json get(const std::string& path) {
    auto r = raw("GET", path);
    INFO(path << " -> " << r.status << " " << r.body);
    REQUIRE(r.status == 200);
    return json::parse(r.body);
  }
  std::string first_system() { return get("/redfish/v1/Systems")["Members"][0]["@odata.id"]; }
  std::string power_state() { return get(first_system())["PowerState"]; }
  json boot() { return get(first_system())["Boot"]; }
  std::size_t sessions() { return get("/redfish/v1/SessionService/Sessions")["Members"].size(); }
};

bool has_mac(const json& inv, const std::string& mac) {
  for (const auto& n : inv["nics"])
    if (n["mac"] == mac) return true;
  return false;
}

// The full round through one BMC: verify, power off/on/reboot, boot overrides,
// each confirmed by the observer; the session is gone after the driver.
void exercise_power_and_boot(const VbmcProcess& v, const std::string& boot_mode) {
  Observer obs(v);
  {
    DriverHarness h(v);
    h.target.boot_mode = boot_mode;
    Status ok = h.verify();
    INFO(((ok) ? std::string() : ok.error().message));
    REQUIRE(ok);

    Status off = h.set_power(PowerAction::kOff);
    INFO(((off) ? std::string() : off.error().message));
    REQUIRE(off);
    CHECK(obs.power_state() == "Off");
    auto p = h.power();
    REQUIRE(p);
    CHECK(*p == PowerState::kOff);

    REQUIRE(h.set_power(PowerAction::kOn));
    CHECK(obs.power_state() == "On");
    REQUIRE(h.set_power(PowerAction::kReboot));
    CHECK(obs.power_state() == "On");

    Status b = h.boot(BootDevice::kPxe, false);
    INFO(((b) ? std::string() : b.error().message));
    REQUIRE(b);
    json boot = obs.boot();
    CHECK(boot["BootSourceOverrideTarget"] == "Pxe");
    CHECK(boot["BootSourceOverrideEnabled"] == "Once");
    CHECK(boot["BootSourceOverrideMode"] == (boot_mode == "bios" ? "Legacy" : "UEFI"));

    REQUIRE(h.boot(BootDevice::kDisk, true));
    boot = obs.boot();
    CHECK(boot["BootSourceOverrideTarget"] == "Hdd");
    CHECK(boot["BootSourceOverrideEnabled"] == "Continuous");

    CHECK(obs.sessions() == 1);  // the driver's one session, reused for everything
  }
  CHECK(obs.sessions() == 0);  // DELETEd when the driver went away
}

}  // namespace

TEST_CASE("libvirt test:///default: power, boot and inventory confirmed through kiln-vbmc", "[redfish][libvirt]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default"}));
  exercise_power_and_boot(v, "bios");

  Observer obs(v);
  DriverHarness h(v);
  h.target.bmc.system_id = "test";  // the domain's name also selects it
  REQUIRE(h.set_power(PowerAction::kSoftOff));
  CHECK(obs.power_state() == "Off");
  REQUIRE(h.set_power(PowerAction::kOn));
  CHECK(obs.power_state() == "On");

  auto inv = h.inspect();
  INFO(((inv) ? inv->dump(2) : inv.error().message));
  REQUIRE(inv);
  CHECK(has_mac(*inv, "aa:bb:cc:dd:ee:ff"));
  CHECK((*inv)["memory_mib"] == 8192);
  CHECK((*inv)["cpus"]["cores"] == 2);
  REQUIRE((*inv)["disks"].size() == 1);
  CHECK((*inv)["disks"][0]["name"] == "vda");

  h.target.bmc.system_id = "no-such-domain";
  Status missing = h.verify();
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code == Code::kNotFound);
  CHECK_THAT(missing.error().message, Catch::Contains("no-such-domain"));
}

TEST_CASE("Supermicro HGX H100 tree: host system, 8 GPUs, host MACs, power and boot", "[redfish][mockup]") {
  if (!have_fixtures()) {
    KILN_SKIP("skipped: no Redfish fixtures at " << kFixtures);
  }
  VbmcProcess v(vbmc_args({"--mockup", kFixtures + "/supermicro-hgx-h100"}));
  exercise_power_and_boot(v, "uefi");

  DriverHarness h(v);
  auto inv = h.inspect();
  REQUIRE(inv);
  INFO(inv->dump(2));
  REQUIRE((*inv)["gpus"].size() == 8);
  for (const auto& g : (*inv)["gpus"]) CHECK(g["model"] == "H100 80GB HBM3");
  CHECK(has_mac(*inv, "94:6d:ae:91:fb:22"));
  CHECK((*inv)["cpus"]["count"] == 2);
  CHECK((*inv)["system"]["product"] == "SYS-821GE-TNHR");
  CHECK((*inv)["system"]["serial"] == "S889914X3710910");
  CHECK((*inv)["firmware"]["bios"] == "1.4");
  CHECK_FALSE((*inv)["firmware"]["bmc"].get<std::string>().empty());
}

TEST_CASE("DMTF public-tower tree: verify, power, boot, inventory with GPU processors", "[redfish][mockup]") {
  if (!have_fixtures()) {
    KILN_SKIP("skipped: no Redfish fixtures at " << kFixtures);
  }
  VbmcProcess v(vbmc_args({"--mockup", kFixtures + "/dmtf-public-tower"}));
  exercise_power_and_boot(v, "uefi");
  DriverHarness h(v);
  auto inv = h.inspect();
  REQUIRE(inv);
  INFO(inv->dump(2));
  REQUIRE((*inv)["gpus"].size() == 2);
  CHECK((*inv)["gpus"][0]["source"] == "processor");
  CHECK((*inv)["cpus"]["count"] == 8);
  CHECK_FALSE((*inv)["nics"].empty());
}

TEST_CASE("DMTF public-rackmount1 tree: verify, power, boot, inventory", "[redfish][mockup]") {
  if (!have_fixtures()) {
    KILN_SKIP("skipped: no Redfish fixtures at " << kFixtures);
  }
  VbmcProcess v(vbmc_args({"--mockup", kFixtures + "/dmtf-public-rackmount1"}));
  exercise_power_and_boot(v, "bios");
  DriverHarness h(v);
  auto inv = h.inspect();
  REQUIRE(inv);
  INFO(inv->dump(2));
  CHECK((*inv)["cpus"]["count"].get<int>() >= 1);
  CHECK((*inv)["gpus"].empty());
  CHECK_FALSE((*inv)["nics"].empty());
  CHECK((*inv)["memory_mib"].get<int64_t>() > 0);
}

TEST_CASE("paged collections are followed through Members@odata.nextLink", "[redfish][mockup]") {
  if (!have_fixtures()) {
    KILN_SKIP("skipped: no Redfish fixtures at " << kFixtures);
  }
  VbmcProcess whole(vbmc_args({"--mockup", kFixtures + "/supermicro-hgx-h100"}));
  VbmcProcess paged(vbmc_args({"--mockup", kFixtures + "/supermicro-hgx-h100", "--page-size", "3"}));
  Observer obs(paged);
  json first = obs.get("/redfish/v1/Chassis/1/PCIeDevices");
  REQUIRE(first["Members"].size() == 3);  // the knob really pages
  REQUIRE(first.contains("Members@odata.nextLink"));

  DriverHarness a(whole), b(paged);
  auto ia = a.inspect();
  auto ib = b.inspect();
  REQUIRE(ia);
  REQUIRE(ib);
  CHECK((*ib)["gpus"].size() == 8);
  CHECK((*ib)["nics"].size() == (*ia)["nics"].size());
  CHECK((*ib)["pcie_devices"].size() == (*ia)["pcie_devices"].size());
}

TEST_CASE("wrong password is kUnauthenticated with a clear message", "[redfish][failure]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default"}));
  DriverHarness h(v, "wrong");
  Status s = h.verify();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kUnauthenticated);
  CHECK_THAT(s.error().message, Catch::Contains("rejected the credentials of user 'admin'"));
  CHECK_THAT(s.error().message, Catch::Contains("authorization error"));
}

TEST_CASE("a BMC slower than the request timeout is kTimeout", "[redfish][failure]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default", "--latency-ms", "1500"}));
  RedfishDriverOptions o = fast_options();
  o.request_timeout = std::chrono::milliseconds(300);
  DriverHarness h(v, kPassword, o);
  const auto start = std::chrono::steady_clock::now();
  Status s = h.verify();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kTimeout);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("a BMC answering 500 has its own words in the error", "[redfish][failure]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default", "--fault-500-rate", "1"}));
  DriverHarness h(v);
  Status s = h.verify();
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kDriverError);
  CHECK_THAT(s.error().message, Catch::Contains("HTTP 500"));
  CHECK_THAT(s.error().message, Catch::Contains("internal service error"));
  CHECK_THAT(s.error().message, Catch::Contains("Base.1.8.InternalError"));
}

TEST_CASE("ETag ladder: weak ETags refused, then If-Match refused altogether", "[redfish][failure]") {
  if (!have_fixtures()) {
    KILN_SKIP("skipped: no Redfish fixtures at " << kFixtures);
  }
  SECTION("stale ETag from another client gets 412") {
    VbmcProcess v(vbmc_args({"--mockup", kFixtures + "/supermicro-hgx-h100"}));
    Observer obs(v);
    auto before = obs.raw("GET", "/redfish/v1/Systems/1");
    const std::string old_etag = before.header("ETag");
    REQUIRE_FALSE(old_etag.empty());
    DriverHarness h(v);
    REQUIRE(h.boot(BootDevice::kPxe, true));
    const std::string patch = R"({"Boot": {"BootSourceOverrideTarget": "Hdd"}})";
    auto stale = obs.raw("PATCH", "/redfish/v1/Systems/1", patch, {{"If-Match", old_etag}});
    CHECK(stale.status == 412);
    CHECK(obs.boot()["BootSourceOverrideTarget"] == "Pxe");
  }
  SECTION("weak ETag refused: the strong form works") {
    VbmcProcess v(vbmc_args({"--mockup", kFixtures + "/supermicro-hgx-h100", "--etag-quirk", "weak"}));
    Observer obs(v);
    auto r = obs.raw("GET", "/redfish/v1/Systems/1");
    REQUIRE(r.header("ETag").rfind("W/", 0) == 0);
    auto weak = obs.raw("PATCH", "/redfish/v1/Systems/1", R"({"Boot": {"BootSourceOverrideEnabled": "Once"}})",
                        {{"If-Match", r.header("ETag")}});
    CHECK(weak.status == 412);  // the quirk is real
    DriverHarness h(v);
    Status s = h.boot(BootDevice::kPxe, true);
    INFO(((s) ? std::string() : s.error().message));
    REQUIRE(s);
    CHECK(obs.boot()["BootSourceOverrideTarget"] == "Pxe");
  }
  SECTION("every If-Match refused: sent without") {
    VbmcProcess v(vbmc_args({"--mockup", kFixtures + "/supermicro-hgx-h100", "--etag-quirk", "always-412"}));
    Observer obs(v);
    DriverHarness h(v);
    Status s = h.boot(BootDevice::kDisk, false);
    INFO(((s) ? std::string() : s.error().message));
    REQUIRE(s);
    CHECK(obs.boot()["BootSourceOverrideTarget"] == "Hdd");
    CHECK(obs.boot()["BootSourceOverrideEnabled"] == "Once");
  }
}

TEST_CASE("a reset type the BMC does not allow is refused before anything is sent", "[redfish][failure]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default", "--allowed-reset-types", "On,GracefulShutdown"}));
  Observer obs(v);
  DriverHarness h(v);
  REQUIRE(h.set_power(PowerAction::kOn));
  Status s = h.set_power(PowerAction::kOff);
  REQUIRE_FALSE(s);
  CHECK(s.error().code == Code::kUnprocessable);
  CHECK_THAT(s.error().message, Catch::Contains("ForceOff"));
  CHECK_THAT(s.error().message, Catch::Contains("allowed: On, GracefulShutdown"));
  CHECK(obs.power_state() == "On");
  // What is allowed still works.
  REQUIRE(h.set_power(PowerAction::kSoftOff));
  CHECK(obs.power_state() == "Off");
}

TEST_CASE("session limit reached: the driver falls back to Basic auth", "[redfish][failure]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default", "--max-sessions", "1"}));
  Observer obs(v);
  auto taken = obs.raw("POST", "/redfish/v1/SessionService/Sessions",
                       R"({"UserName": "admin", "Password": "s3cret"})");
  REQUIRE(taken.status == 201);
  auto refused = obs.raw("POST", "/redfish/v1/SessionService/Sessions",
                         R"({"UserName": "admin", "Password": "s3cret"})");
  REQUIRE(refused.status == 503);  // the limit is real
  {
    DriverHarness h(v);
    Status s = h.verify();
    INFO(((s) ? std::string() : s.error().message));
    REQUIRE(s);
    REQUIRE(h.set_power(PowerAction::kOff));
    CHECK(obs.power_state() == "Off");
    CHECK(obs.sessions() == 1);
  }
  SECTION("and with a wrong password the error says both") {
    DriverHarness bad(v, "wrong");
    Status s = bad.verify();
    REQUIRE_FALSE(s);
    CHECK(s.error().code == Code::kUnauthenticated);
  }
}

TEST_CASE("boot override goes through @Redfish.Settings when the system has one", "[redfish][libvirt]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default", "--settings-object"}));
  Observer obs(v);
  const std::string sys = obs.first_system();
  const json system = obs.get(sys);
  REQUIRE(system["@Redfish.Settings"]["SettingsObject"]["@odata.id"] == sys + "/Settings");
  // The system itself refuses Boot, so only a driver using the settings object succeeds.
  auto direct = obs.raw("PATCH", sys, R"({"Boot": {"BootSourceOverrideTarget": "Hdd"}})");
  CHECK(direct.status == 400);
  CHECK_THAT(direct.body, Catch::Contains("PropertyNotWritable"));

  DriverHarness h(v);
  Status b = h.boot(BootDevice::kPxe, false);
  INFO(((b) ? std::string() : b.error().message));
  REQUIRE(b);
  json boot = obs.boot();
  CHECK(boot["BootSourceOverrideTarget"] == "Pxe");
  CHECK(boot["BootSourceOverrideEnabled"] == "Once");
  CHECK(obs.get(sys + "/Settings")["Boot"]["BootSourceOverrideTarget"] == "Pxe");
}

TEST_CASE("307 redirects are followed for reads, actions and patches", "[redfish][libvirt]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default", "--redirect-prefix"}));
  Observer obs(v);
  const std::string sys = obs.first_system();
  REQUIRE(sys.rfind("/redfish/v1/Systems/", 0) == 0);
  const std::string moved = "/redfish/v1/Systems-moved/" + sys.substr(std::string("/redfish/v1/Systems/").size());
  auto r = obs.raw("GET", sys);
  REQUIRE(r.status == 307);  // the redirect is real
  CHECK(r.header("Location") == moved);

  DriverHarness h(v);
  Status ok = h.verify();
  INFO(((ok) ? std::string() : ok.error().message));
  REQUIRE(ok);
  Status off = h.set_power(PowerAction::kOff);
  INFO(((off) ? std::string() : off.error().message));
  REQUIRE(off);
  CHECK(obs.get(moved)["PowerState"] == "Off");
  auto p = h.power();
  REQUIRE(p);
  CHECK(*p == PowerState::kOff);
  REQUIRE(h.set_power(PowerAction::kOn));
  CHECK(obs.get(moved)["PowerState"] == "On");

  Status b = h.boot(BootDevice::kPxe, false);
  INFO(((b) ? std::string() : b.error().message));
  REQUIRE(b);
  const json boot = obs.get(moved)["Boot"];
  CHECK(boot["BootSourceOverrideTarget"] == "Pxe");
  CHECK(boot["BootSourceOverrideEnabled"] == "Once");
}

TEST_CASE("an expired session: the driver logs in again once and carries on", "[redfish][failure]") {
  VbmcProcess v(vbmc_args({"--libvirt-uri", "test:///default"}));
  Observer obs(v);
  DriverHarness h(v);
  REQUIRE(h.verify());
  REQUIRE(obs.sessions() == 1);
  // The BMC forgets the driver's session, as after a session timeout or a BMC reboot.
  std::string session = obs.get("/redfish/v1/SessionService/Sessions")["Members"][0]["@odata.id"];
  REQUIRE(obs.raw("DELETE", session).status == 204);
  REQUIRE(obs.sessions() == 0);
  // The next call gets 401, logs in again and succeeds.
  Status on = h.set_power(PowerAction::kOn);
  INFO((on ? std::string("ok") : on.error().message));
  REQUIRE(on);
  CHECK(obs.power_state() == "On");
  CHECK(obs.sessions() == 1);
  std::string again = obs.get("/redfish/v1/SessionService/Sessions")["Members"][0]["@odata.id"];
  CHECK(again != session);
}
