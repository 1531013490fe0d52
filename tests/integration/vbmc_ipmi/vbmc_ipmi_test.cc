// kiln-vbmc's IPMI side and its fleet mode.
//
//  * ipmitool (an independent RMCP+ implementation) against kiln-vbmc on
//    libvirt's test:///default and on a captured Redfish tree: power
//    status/on/off/cycle and bootdev pxe/disk, each change confirmed by a
//    Redfish GET through the same kiln-vbmc (each process opening
//    test:///default has private state, so only kiln-vbmc can tell).
//  * Kiln's own IPMI driver against kiln-vbmc with cipher suites 3 and 17.
//  * Wrong passwords and user names are rejected.
//  * The BMC side in process: replayed, tampered and unauthenticated
//    datagrams get no answer; unknown commands get 0xC1.
//  * Fleet: 200 BMCs with injected faults swept by PowerSync through a
//    temporary SQLite store; 5% packet loss causes no false faults.
//  * Bad flags exit with status 2.

#include <utility>  // before Asio

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>
#include "tests/support/skip.h"
#include <nlohmann/json.hpp>

#include "common/blocking_pool.h"
#include "common/crypto.h"
#include "controller/conductor/power_sync.h"
#include "controller/store/store.h"
#include "drivers/ipmi/commands.h"
#include "drivers/ipmi/ipmi_driver.h"
#include "drivers/ipmi/wire.h"
#include "drivers/redfish/redfish_driver.h"
#include "tests/support/vbmc_child.h"
#include "tests/support/http_test_client.h"
#include "tools/vbmc/fleet_backend.h"
#include "tools/vbmc/fleet_plan.h"
#include "tools/vbmc/ipmi_bmc.h"

namespace {

using namespace kiln;
using nlohmann::json;
using testing::VbmcChild;
namespace asio = boost::asio;
using namespace std::chrono_literals;

const std::string kFixtures = KILN_REDFISH_FIXTURES;
const std::string kUser = "operator";
const std::string kPassword = "s3cret-ipmi";
const std::string kIpmiLine = "ipmi listening on ";
const std::string kRedfishLine = "redfish listening on https://";
const std::string kFleetLine = "fleet ready: ";

bool have_ipmitool() { return std::system("ipmitool -V >/dev/null 2>&1") == 0; }

struct CommandResult {
  int status = -1;
  std::string output;
};

// Runs a shell command, returning its exit status and stdout+stderr.
CommandResult shell(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) r.output += buf;
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

CommandResult ipmitool(uint16_t port, const std::string& args, int suite = 3,
                       const std::string& password = kPassword, const std::string& user = kUser) {
  return shell("ipmitool -I lanplus -C " + std::to_string(suite) + " -N 1 -R 3 -H 127.0.0.1 -p " +
               std::to_string(port) + " -U " + user + " -P " + password + " " + args);
}

std::vector<std::string> single_args(std::vector<std::string> backend) {
  std::vector<std::string> a = {"--redfish-listen", "127.0.0.1:0", "--ipmi-listen", "127.0.0.1:0",
                                "--user", kUser, "--password", kPassword, "--log-level", "warn"};
  a.insert(a.end(), backend.begin(), backend.end());
  return a;
}

// The independent observer: Redfish GETs (Basic auth) through kiln-vbmc.
struct Observer {
  testing::HttpTestClient client;
  testing::Headers auth;
  std::string system;  // the URI of the system the IPMI side fronts
  explicit Observer(uint16_t port) : client("127.0.0.1", port, true) {
    auth["Authorization"] = "Basic " + base64_encode(kUser + ":" + kPassword);
    auto r = client.request("GET", "/redfish/v1/Systems", "", auth);
    REQUIRE(r.status == 200);
    const json c = json::parse(r.body);
    REQUIRE(!c["Members"].empty());
    system = c["Members"][0]["@odata.id"].get<std::string>();
  }
  json get_system() {
    auto r = client.request("GET", system, "", auth);
    REQUIRE(r.status == 200);
    return json::parse(r.body);
  }
  std::string power() { return get_system().value("PowerState", ""); }
  std::string boot_target() { return get_system()["Boot"].value("BootSourceOverrideTarget", ""); }
};

// The ipmitool conversation both back-ends must hold.
void ipmitool_round(uint16_t ipmi_port, Observer& obs) {
  auto st = ipmitool(ipmi_port, "chassis power on");
  INFO(st.output);
  REQUIRE(st.status == 0);
  CHECK(obs.power() == "On");
  st = ipmitool(ipmi_port, "chassis power status");
  CHECK(st.output.find("Chassis Power is on") != std::string::npos);

  st = ipmitool(ipmi_port, "chassis power off");
  REQUIRE(st.status == 0);
  CHECK(obs.power() == "Off");
  st = ipmitool(ipmi_port, "chassis power status");
  CHECK(st.output.find("Chassis Power is off") != std::string::npos);

  st = ipmitool(ipmi_port, "chassis power cycle");
  REQUIRE(st.status == 0);
  CHECK(obs.power() == "On");  // a cycle from off powers the machine up

  st = ipmitool(ipmi_port, "chassis power off");
  REQUIRE(st.status == 0);
  st = ipmitool(ipmi_port, "chassis power on");
  REQUIRE(st.status == 0);
  CHECK(obs.power() == "On");

  st = ipmitool(ipmi_port, "chassis bootdev pxe");
  INFO(st.output);
  REQUIRE(st.status == 0);
  CHECK(obs.boot_target() == "Pxe");
  CHECK(obs.get_system()["Boot"].value("BootSourceOverrideEnabled", "") == "Once");
  st = ipmitool(ipmi_port, "chassis bootparam get 5");
  CHECK(st.output.find("Force PXE") != std::string::npos);

  st = ipmitool(ipmi_port, "chassis bootdev disk options=persistent,efiboot");
  REQUIRE(st.status == 0);
  const json sys = obs.get_system();
  CHECK(sys["Boot"].value("BootSourceOverrideTarget", "") == "Hdd");
  CHECK(sys["Boot"].value("BootSourceOverrideEnabled", "") == "Continuous");
  CHECK(sys["Boot"].value("BootSourceOverrideMode", "") == "UEFI");

  // Suite 17 (HMAC-SHA256) speaks too.
  st = ipmitool(ipmi_port, "chassis power status", 17);
  INFO(st.output);
  CHECK(st.status == 0);
  CHECK(st.output.find("Chassis Power is on") != std::string::npos);

  // An unknown command: 0xC1 "Invalid command".
  st = ipmitool(ipmi_port, "raw 0x06 0x99");
  CHECK(st.status != 0);
  CHECK(st.output.find("rsp=0xc1") != std::string::npos);
}

// ---- Kiln's driver ---------------------------------------------------------------------------------

IpmiDriverOptions fast_ipmi_options() {
  IpmiDriverOptions o;
  o.request_timeout = 300ms;
  o.retries = 3;
  o.command_deadline = 15s;
  o.power_timeout = 15s;
  o.poll_interval = 50ms;
  return o;
}

struct IpmiDriverHarness {
  asio::io_context io;
  std::unique_ptr<Driver> driver;
  DriverTarget target;

  IpmiDriverHarness(uint16_t port, int suite, std::string password = kPassword,
                    std::string user = kUser) {
    driver = make_ipmi_driver(io.get_executor(), fast_ipmi_options(), Logger(LogLevel::kOff));
    target.node_id = "node-ipmi";
    target.bmc.driver = "ipmi";
    target.bmc.address = "127.0.0.1:" + std::to_string(port);
    target.bmc.username = std::move(user);
    target.bmc.options = json{{"cipher_suite", suite}};
    target.password = std::move(password);
    target.boot_mode = "uefi";
  }
  ~IpmiDriverHarness() {
    driver.reset();  // best-effort Close Session datagrams
  }
  template <typename T>
  T run(asio::awaitable<T> op) {
    auto f = asio::co_spawn(io, std::move(op), asio::use_future);
    io.restart();
    io.run();
    return f.get();
  }
  Status verify() { return run(driver->management->verify(target)); }
  Result<PowerState> power() { return run(driver->power->get_power_state(target)); }
  Status set_power(PowerAction a) { return run(driver->power->set_power_state(target, a)); }
  Status boot(BootDevice d, bool persistent) {
    return run(driver->management->set_boot_device(target, d, persistent));
  }
};

// ---- In-process console for the BMC side ------------------------------------------------------------

// Just enough of a console to open a session with an IpmiBmc directly and
// send it datagrams (the driver's session class needs a socket).
struct InProcessConsole {
  asio::io_context io;
  vbmc::IpmiBmc& bmc;
  ipmi::CipherSuite suite = *ipmi::cipher_suite(3);
  uint32_t console_sid = 0x11223344;
  uint32_t bmc_sid = 0;
  uint32_t seq = 0;
  uint8_t rq = 0;
  ipmi::SessionKeys keys;

  explicit InProcessConsole(vbmc::IpmiBmc& b) : bmc(b) {}

  std::optional<ipmi::Bytes> send(const ipmi::Bytes& datagram) {
    const ipmi::ByteView view(datagram);
    auto f = asio::co_spawn(io, bmc.handle(view), asio::use_future);
    io.restart();
    io.run();
    return f.get();
  }

  static ipmi::Bytes plain(ipmi::PayloadType t, const ipmi::Bytes& payload) {
    ipmi::V2Header h;
    h.type = t;
    return ipmi::encode_v2_packet(h, payload, nullptr);
  }

  // Open Session + RAKP 1..4 with `password`; returns the RAKP 4 status or
  // the first failure as a negative number.
  int open(const std::string& user, const std::string& password) {
    ipmi::OpenSessionRequest os;
    os.tag = 7;
    os.console_session_id = console_sid;
    os.suite = suite;
    auto r = send(plain(ipmi::PayloadType::kOpenSessionRequest, ipmi::encode_open_session_request(os)));
    if (!r) return -1;
    auto p = ipmi::decode_v2_packet(*r, nullptr);
    auto osr = ipmi::decode_open_session_response(p->payload);
    if (!osr || osr->status != 0) return -2;
    bmc_sid = osr->bmc_session_id;

    ipmi::RakpContext ctx;
    ctx.console_session_id = console_sid;
    ctx.bmc_session_id = bmc_sid;
    ctx.console_random.fill(0x42);
    ctx.role = 0x14;
    ctx.username = user;
    ipmi::Rakp1 r1;
    r1.tag = 7;
    r1.bmc_session_id = bmc_sid;
    r1.console_random = ctx.console_random;
    r1.username = user;
    r = send(plain(ipmi::PayloadType::kRakp1, ipmi::encode_rakp1(r1)));
    if (!r) return -3;
    p = ipmi::decode_v2_packet(*r, nullptr);
    auto r2 = ipmi::decode_rakp2(p->payload, ipmi::rakp_auth_code_len(suite.auth));
    if (!r2) return -4;
    if (r2->status != 0) return r2->status;
    ctx.bmc_random = r2->bmc_random;
    ctx.bmc_guid = r2->bmc_guid;
    const ipmi::Bytes kuid = ipmi::password_key(password);
    ipmi::Rakp3 r3;
    r3.tag = 7;
    r3.bmc_session_id = bmc_sid;
    r3.auth_code = ipmi::rakp3_auth_code(suite.auth, kuid, ctx);
    r = send(plain(ipmi::PayloadType::kRakp3, ipmi::encode_rakp3(r3)));
    if (!r) return -5;
    p = ipmi::decode_v2_packet(*r, nullptr);
    auto r4 = ipmi::decode_rakp4(p->payload, ipmi::rakp4_icv_len(suite.auth));
    if (!r4) return -6;
    if (r4->status != 0) return r4->status;
    const ipmi::Bytes sik = ipmi::session_integrity_key(suite.auth, kuid, ctx);
    if (!ipmi::bytes_equal(ipmi::rakp4_icv(suite.auth, sik, ctx), r4->icv)) return -7;
    keys = ipmi::derive_session_keys(suite, sik);
    return 0;
  }

  ipmi::Bytes command_packet(uint8_t net_fn, uint8_t cmd, const ipmi::Bytes& data) {
    ipmi::IpmiRequest req;
    req.net_fn = net_fn;
    req.cmd = cmd;
    req.rq_seq = ++rq & 0x3F;
    req.data = data;
    ipmi::V2Header h;
    h.type = ipmi::PayloadType::kIpmi;
    h.encrypted = true;
    h.authenticated = true;
    h.session_id = bmc_sid;
    h.sequence = ++seq;
    return ipmi::encode_v2_packet(h, ipmi::encode_ipmi_request(req), &keys, ipmi::random_bytes(16));
  }

  std::optional<ipmi::IpmiResponse> response(const std::optional<ipmi::Bytes>& datagram) {
    if (!datagram) return std::nullopt;
    auto p = ipmi::decode_v2_packet(*datagram, &keys);
    if (!p || p->header.session_id != console_sid) return std::nullopt;
    auto r = ipmi::decode_ipmi_response(p->payload);
    if (!r) return std::nullopt;
    return *r;
  }
};

// ---- Fleet sweeps --------------------------------------------------------------------------------

json read_manifest(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  json m = json::parse(in, nullptr, false);
  REQUIRE(m.is_array());
  return m;
}

bool has_fault(const json& entry, const std::string& fault) {
  for (const auto& f : entry["faults"]) {
    if (f.get<std::string>() == fault) return true;
  }
  return false;
}

// A temporary store with one node per manifest entry, the real ipmi and
// redfish drivers, and PowerSync over them.
class SweepHarness {
 public:
  explicit SweepHarness(PowerSyncOptions opts)
      : dir_(make_dir()), work_(asio::make_work_guard(io_)), db_(2), box_(SecretBox::Key{9, 8, 7}) {
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
    REQUIRE(s);
    store_ = std::move(*s);
    REQUIRE(store_->migrate());
    IpmiDriverOptions io;
    io.request_timeout = 250ms;
    io.command_deadline = 10s;
    drivers_.add(make_ipmi_driver(io_.get_executor(), io, Logger(LogLevel::kOff)));
    RedfishDriverOptions ro;
    ro.request_timeout = 2s;
    ro.command_deadline = 10s;
    ro.logout_timeout = 1s;
    drivers_.add(make_redfish_driver(io_.get_executor(), ro, Logger(LogLevel::kOff)));
    sync_ = std::make_unique<PowerSync>(io_, *store_, db_, drivers_, box_, opts, Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~SweepHarness() {
    sync_.reset();
    // Destroy the drivers on the I/O thread's terms: stop it first.
    work_.reset();
    io_.stop();
    thread_.join();
    db_.stop();
    std::filesystem::remove_all(dir_);
  }

  // `ipmi_retries`: resends per IPMI exchange (bmc.options.retries).
  void enroll(const json& e, int ipmi_retries = 3) {
    Node n;
    const std::string protocol = e["protocol"].get<std::string>();
    n.name = e["name"].get<std::string>() + "-" + protocol;
    n.bmc.driver = protocol;
    const std::string hostport = e["address"].get<std::string>() + ":" + std::to_string(e["port"].get<int>());
    n.bmc.address = protocol == "redfish" ? "https://" + hostport : hostport;
    n.bmc.username = e["username"].get<std::string>();
    n.bmc.password_sealed = box_.seal(e["password"].get<std::string>());
    n.bmc.verify_tls = false;
    if (protocol == "redfish") {
      n.bmc.system_id = e["system_id"].get<std::string>();
      n.bmc.options = json{{"request_timeout_s", 2}};
    } else {
      n.bmc.options = json{{"timeout_ms", 250}, {"retries", ipmi_retries}};
    }
    n.provision_state = ProvisionState::kManageable;
    EventDraft ev;
    ev.type = "node.created";
    auto r = store_->create_node(n, ev);
    REQUIRE(r);
  }

  SweepStats sweep() { return asio::co_spawn(io_, sync_->sweep_once(), asio::use_future).get(); }

  // Names of the nodes that carry a fault.
  std::set<std::string> faulted() {
    std::set<std::string> out;
    ListOptions lo;
    lo.limit = 1000;
    NodeFilter f;
    auto nodes = store_->list_nodes(f, lo);
    REQUIRE(nodes);
    for (const Node& n : *nodes) {
      if (!n.fault.empty()) out.insert(n.name);
    }
    return out;
  }

 private:
  static std::string make_dir() {
    char tmpl[] = "/tmp/kiln-vbmc-ipmi-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    return tmpl;
  }

  std::string dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool db_;
  SecretBox box_;
  std::unique_ptr<NodeStore> store_;
  DriverRegistry drivers_;
  std::unique_ptr<PowerSync> sync_;
  std::thread thread_;
};

std::string temp_manifest() {
  char tmpl[] = "/tmp/kiln-fleet-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  ::close(fd);
  return tmpl;
}

}  // namespace

// ---- ipmitool against kiln-vbmc ---------------------------------------------------------------------

TEST_CASE("ipmitool drives a libvirt test:///default domain through kiln-vbmc's IPMI side") {
  if (!have_ipmitool()) {
    KILN_SKIP("ipmitool is not installed; skipping");
  }
  VbmcChild v(single_args({"--libvirt-uri", "test:///default"}), {kIpmiLine, kRedfishLine});
  CHECK(v.line(kIpmiLine).rfind("127.0.0.1:", 0) == 0);
  Observer obs(v.port_of(kRedfishLine));
  ipmitool_round(v.port_of(kIpmiLine), obs);
}

TEST_CASE("ipmitool drives a captured Redfish tree through kiln-vbmc's IPMI side") {
  if (!have_ipmitool()) {
    KILN_SKIP("ipmitool is not installed; skipping");
  }
  int served = 0;
  for (const std::string tree : {"dmtf-public-rackmount1", "supermicro-hgx-h100"}) {
    const std::string dir = kFixtures + "/" + tree;
    if (!std::filesystem::exists(dir)) continue;
    DYNAMIC_SECTION(tree) {
      VbmcChild v(single_args({"--mockup", dir}), {kIpmiLine, kRedfishLine});
      Observer obs(v.port_of(kRedfishLine));
      ipmitool_round(v.port_of(kIpmiLine), obs);
    }
    ++served;
  }
  if (served == 0) KILN_SKIP("no Redfish fixtures under " << kFixtures);
}

TEST_CASE("wrong passwords and unknown users are refused") {
  VbmcChild v(single_args({"--libvirt-uri", "test:///default"}), {kIpmiLine, kRedfishLine});
  const uint16_t port = v.port_of(kIpmiLine);
  if (have_ipmitool()) {
    auto st = ipmitool(port, "chassis power status", 3, "not-the-password");
    INFO(st.output);
    CHECK(st.status != 0);
    CHECK(st.output.find("Chassis Power is") == std::string::npos);
    st = ipmitool(port, "chassis power status", 3, kPassword, "mallory");
    CHECK(st.status != 0);
    CHECK(st.output.find("Chassis Power is") == std::string::npos);
  } else {
    WARN("ipmitool is not installed; only the driver is checked");
  }
  for (int suite : {3, 17}) {
    IpmiDriverHarness wrong_pw(port, suite, "not-the-password");
    auto r = wrong_pw.power();
    REQUIRE(!r);
    CHECK(r.error().code == Code::kUnauthenticated);
    IpmiDriverHarness wrong_user(port, suite, kPassword, "mallory");
    auto u = wrong_user.power();
    REQUIRE(!u);
    CHECK(u.error().code == Code::kUnauthenticated);
  }
}

// ---- Kiln's driver against kiln-vbmc -------------------------------------------------------------------

TEST_CASE("the ipmi driver drives kiln-vbmc with cipher suites 3 and 17") {
  VbmcChild v(single_args({"--libvirt-uri", "test:///default"}), {kIpmiLine, kRedfishLine});
  Observer obs(v.port_of(kRedfishLine));
  for (int suite : {3, 17}) {
    DYNAMIC_SECTION("suite " << suite) {
      IpmiDriverHarness h(v.port_of(kIpmiLine), suite);
      REQUIRE(h.verify());
      REQUIRE(h.set_power(PowerAction::kOff));
      CHECK(obs.power() == "Off");
      auto p = h.power();
      REQUIRE(p);
      CHECK(*p == PowerState::kOff);
      REQUIRE(h.set_power(PowerAction::kOn));
      CHECK(obs.power() == "On");
      REQUIRE(h.set_power(PowerAction::kReboot));
      CHECK(obs.power() == "On");
      REQUIRE(h.boot(BootDevice::kPxe, false));
      json sys = obs.get_system();
      CHECK(sys["Boot"]["BootSourceOverrideTarget"] == "Pxe");
      CHECK(sys["Boot"]["BootSourceOverrideEnabled"] == "Once");
      CHECK(sys["Boot"]["BootSourceOverrideMode"] == "UEFI");
      REQUIRE(h.boot(BootDevice::kDisk, true));
      sys = obs.get_system();
      CHECK(sys["Boot"]["BootSourceOverrideTarget"] == "Hdd");
      CHECK(sys["Boot"]["BootSourceOverrideEnabled"] == "Continuous");
      REQUIRE(h.set_power(PowerAction::kSoftOff));
      CHECK(obs.power() == "Off");
    }
  }
}

// ---- The BMC side in process ----------------------------------------------------------------------------

TEST_CASE("the BMC side drops replays, forgeries and unauthenticated session traffic") {
  vbmc::FleetBackend backend(1, 1);
  vbmc::IpmiBmcOptions o;
  o.user = kUser;
  o.password = kPassword;
  vbmc::IpmiBmc bmc(backend, vbmc::FleetBackend::fleet_machine_id(0), o, Logger(LogLevel::kOff));

  SECTION("a wrong password fails RAKP 3 and leaves no session") {
    InProcessConsole c(bmc);
    CHECK(c.open(kUser, "wrong") == 0x0F);  // invalid integrity check value
    CHECK(bmc.session_count() == 0);
  }
  SECTION("an unknown user fails RAKP 1") {
    InProcessConsole c(bmc);
    CHECK(c.open("mallory", kPassword) == 0x0D);  // unauthorized name
    CHECK(bmc.session_count() == 0);
  }
  SECTION("session traffic") {
    InProcessConsole c(bmc);
    REQUIRE(c.open(kUser, kPassword) == 0);
    CHECK(bmc.active_session_count() == 1);

    const ipmi::Bytes status = c.command_packet(ipmi::kNetFnChassis, ipmi::kCmdGetChassisStatus, {});
    auto r = c.response(c.send(status));
    REQUIRE(r);
    CHECK(r->completion_code == 0);
    CHECK((r->data.at(0) & 0x01) == 0);  // fleet machines start off

    // The same datagram again: a replay, silently dropped.
    CHECK(!c.send(status));

    // Chassis Control needs OPERATOR; sessions start at USER.
    const ipmi::Bytes on{0x01};
    r = c.response(c.send(c.command_packet(ipmi::kNetFnChassis, ipmi::kCmdChassisControl, on)));
    REQUIRE(r);
    CHECK(r->completion_code == 0xD4);
    const ipmi::Bytes admin{0x04};
    r = c.response(c.send(c.command_packet(ipmi::kNetFnApp, ipmi::kCmdSetSessionPrivilege, admin)));
    REQUIRE(r);
    CHECK(r->completion_code == 0);
    r = c.response(c.send(c.command_packet(ipmi::kNetFnChassis, ipmi::kCmdChassisControl, on)));
    REQUIRE(r);
    CHECK(r->completion_code == 0);
    r = c.response(c.send(c.command_packet(ipmi::kNetFnChassis, ipmi::kCmdGetChassisStatus, {})));
    REQUIRE(r);
    CHECK((r->data.at(0) & 0x01) == 1);

    // A flipped MAC byte: no answer.
    ipmi::Bytes forged = c.command_packet(ipmi::kNetFnChassis, ipmi::kCmdGetChassisStatus, {});
    forged.back() ^= 0x01;
    CHECK(!c.send(forged));

    // Unauthenticated traffic to the active session: no answer.
    ipmi::IpmiRequest req;
    req.net_fn = ipmi::kNetFnChassis;
    req.cmd = ipmi::kCmdGetChassisStatus;
    ipmi::V2Header h;
    h.session_id = c.bmc_sid;
    h.sequence = ++c.seq;
    CHECK(!c.send(ipmi::encode_v2_packet(h, ipmi::encode_ipmi_request(req), nullptr)));

    // Unknown commands: 0xC1.
    r = c.response(c.send(c.command_packet(ipmi::kNetFnApp, 0x99, {})));
    REQUIRE(r);
    CHECK(r->completion_code == 0xC1);

    // Truncated and oversized datagrams: no answer, no crash.
    ipmi::Bytes good = c.command_packet(ipmi::kNetFnChassis, ipmi::kCmdGetChassisStatus, {});
    ipmi::Bytes truncated(good.begin(), good.begin() + 20);
    CHECK(!c.send(truncated));
    ipmi::Bytes oversized(2000, 0x06);
    CHECK(!c.send(oversized));

    // Close Session: answered, then the session is gone.
    ipmi::Bytes sid;
    for (int i = 0; i < 4; ++i) sid.push_back(static_cast<uint8_t>(c.bmc_sid >> (8 * i)));
    r = c.response(c.send(c.command_packet(ipmi::kNetFnApp, ipmi::kCmdCloseSession, sid)));
    REQUIRE(r);
    CHECK(r->completion_code == 0);
    CHECK(bmc.session_count() == 0);
    CHECK(!c.send(c.command_packet(ipmi::kNetFnChassis, ipmi::kCmdGetChassisStatus, {})));
  }
}

// ---- Fleet ----------------------------------------------------------------------------------------------

TEST_CASE("fleet plans are deterministic, exact and disjoint") {
  vbmc::FleetOptions o;
  o.count = 200;
  o.seed = 7;
  o.dead_fraction = 0.05;
  o.lockout_fraction = 0.05;
  o.http500_fraction = 0.1;
  o.latency_fraction = 0.1;
  auto a = vbmc::plan_fleet(o);
  auto b = vbmc::plan_fleet(o);
  REQUIRE(a);
  REQUIRE(b);
  int dead = 0, lockout = 0, http500 = 0, latency = 0;
  for (std::size_t i = 0; i < a->size(); ++i) {
    const auto& x = (*a)[i];
    CHECK(x.dead == (*b)[i].dead);
    CHECK(x.password == (*b)[i].password);
    CHECK(int(x.dead) + int(x.lockout) + int(x.http500) + int(x.latency) <= 1);
    dead += x.dead;
    lockout += x.lockout;
    http500 += x.http500;
    latency += x.latency;
  }
  CHECK(dead == 10);
  CHECK(lockout == 10);
  CHECK(http500 == 20);
  CHECK(latency == 20);
  CHECK(a->front().address == "127.2.0.1");
  CHECK(a->back().address == "127.2.0.200");
  o.seed = 8;
  auto c = vbmc::plan_fleet(o);
  REQUIRE(c);
  bool differs = false;
  for (std::size_t i = 0; i < c->size(); ++i) differs = differs || (*c)[i].dead != (*a)[i].dead;
  CHECK(differs);
  o.dead_fraction = 0.9;
  CHECK(!vbmc::plan_fleet(o));
}

TEST_CASE("a fleet of 200 BMCs with faults, swept by PowerSync") {
  const std::string manifest = temp_manifest();
  VbmcChild v({"--fleet", "200", "--fleet-manifest", manifest, "--fleet-protocols", "ipmi,redfish",
               "--fleet-address-base", "127.3.0.1", "--seed", "7", "--fault-dead-fraction", "0.05",
               "--fault-lockout-fraction", "0.05", "--fault-500-fraction", "0.05",
               "--fault-latency-fraction", "0.1", "--fault-latency-ms", "20", "--log-level", "error"},
              {kFleetLine});
  const json m = read_manifest(manifest);
  std::filesystem::remove(manifest);
  REQUIRE(m.size() == 400);

  PowerSyncOptions po;
  po.concurrency = 64;
  po.max_failures = 1;  // fault on the first failed sweep
  SweepHarness h(po);
  std::set<std::string> expect_faulted;
  std::set<std::string> names;
  for (const json& e : m) {
    const std::string protocol = e["protocol"];
    // Every IPMI BMC, and the Redfish side of the first 60.
    if (protocol == "redfish" && e["name"].get<std::string>() >= "bmc-00060") continue;
    h.enroll(e, 1);  // dead BMCs then cost ~4 s, not ~10
    const std::string node = e["name"].get<std::string>() + "-" + protocol;
    names.insert(node);
    if (has_fault(e, "dead") || has_fault(e, "lockout") || has_fault(e, "http_500")) {
      expect_faulted.insert(node);
    }
    // Every BMC is its own address, all of them on one port per protocol.
    CHECK(e["port"].get<int>() == m[protocol == "ipmi" ? 0 : 1]["port"].get<int>());
  }
  REQUIRE(names.size() == 260);
  REQUIRE(!expect_faulted.empty());

  const SweepStats s = h.sweep();
  CHECK(s.nodes == 260);
  CHECK(s.failed == expect_faulted.size());
  CHECK(s.ok == 260 - expect_faulted.size());
  CHECK(s.faulted == expect_faulted.size());
  CHECK(h.faulted() == expect_faulted);

  // The second sweep reuses the IPMI sessions and sees the same picture.
  const SweepStats again = h.sweep();
  CHECK(again.ok == s.ok);
  CHECK(again.failed == s.failed);
  CHECK(again.faulted == 0);  // already faulted
}

TEST_CASE("5% packet loss makes no false power_failure faults") {
  const std::string manifest = temp_manifest();
  VbmcChild v({"--fleet", "200", "--fleet-manifest", manifest, "--fleet-protocols", "ipmi",
               "--fleet-address-base", "127.4.0.1", "--seed", "11", "--fault-drop-fraction", "0.05",
               "--log-level", "error"},
              {kFleetLine});
  const json m = read_manifest(manifest);
  std::filesystem::remove(manifest);
  REQUIRE(m.size() == 200);
  CHECK(has_fault(m[0], "drop=0.05"));

  PowerSyncOptions po;
  po.concurrency = 64;
  po.max_failures = 3;
  SweepHarness h(po);
  for (const json& e : m) h.enroll(e);
  std::size_t ok = 0;
  for (int sweep = 0; sweep < 3; ++sweep) {
    const SweepStats s = h.sweep();
    CHECK(s.nodes == 200);
    CHECK(s.faulted == 0);
    ok += s.ok;
  }
  CHECK(h.faulted().empty());
  // Loss costs retransmissions, not answers: nearly every read succeeds.
  CHECK(ok >= 3 * 200 - 3);
}

// ---- Command line ------------------------------------------------------------------------------------------

TEST_CASE("kiln-vbmc refuses bad flags with exit status 2") {
  const std::vector<std::vector<std::string>> bad = {
      {"--fleet", "0", "--fleet-manifest", "/tmp/x.json"},
      {"--fleet", "10"},
      {"--fleet", "10", "--fleet-manifest", "/tmp/x.json", "--libvirt-uri", "test:///default"},
      {"--fleet", "10", "--fleet-manifest", "/tmp/x.json", "--fault-drop-fraction", "1.5"},
      {"--fleet", "10", "--fleet-manifest", "/tmp/x.json", "--fleet-protocols", "smtp"},
      {"--fleet", "10", "--fleet-manifest", "/tmp/x.json", "--fault-bmc", "dead=10"},
      {"--fleet", "10", "--fleet-manifest", "/tmp/x.json", "--fault-bmc", "melted=1"},
      {"--fleet", "10", "--fleet-manifest", "/tmp/x.json", "--fault-dead-fraction", "0.6",
       "--fault-lockout-fraction", "0.6"},
      {"--fleet", "10", "--fleet-manifest", "/tmp/x.json", "--fleet-address-base", "10.0.0.1"},
      {"--libvirt-uri", "test:///default", "--ipmi-listen", "nope"},
      {"--libvirt-uri", "test:///default", "--ipmi-listen", "127.0.0.1:99999"},
      {"--libvirt-uri", "test:///default", "--ipmi-listen", "127.0.0.1:0", "--password",
       "a-password-longer-than-twenty"},
      {"--libvirt-uri", "test:///default", "--ipmi-listen", "127.0.0.1:0", "--ipmi-system", "no-such-vm"},
      {"--libvirt-uri", "test:///default", "--no-such-flag"},
  };
  for (const auto& args : bad) {
    std::string shown;
    for (const auto& a : args) shown += a + " ";
    INFO(shown);
    CHECK(testing::run_vbmc_to_exit(args) == 2);
  }
}
