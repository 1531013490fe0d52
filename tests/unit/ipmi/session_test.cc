// IpmiSession and the driver against the scripted FakeBmc on loopback:
// handshake, reuse, wrong credentials, lost/duplicated/forged replies,
// session expiry (re-open once), deadlines, spacing, and the driver's
// power/boot flows and validation.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include "drivers/ipmi/ipmi_driver.h"
#include "drivers/ipmi/session.h"
#include "tests/unit/ipmi/fake_bmc.h"

using namespace kiln;
using namespace kiln::ipmi;
using namespace kiln::ipmi::test;
using namespace std::chrono_literals;

namespace {

SessionConfig config_for(const FakeBmc& bmc, std::string password = "secret", int suite = 3) {
  SessionConfig c;
  c.endpoint = BmcEndpoint{"127.0.0.1", bmc.port()};
  c.username = "admin";
  c.password = std::move(password);
  c.suite = *cipher_suite(suite);
  c.request_timeout = 50ms;
  c.max_request_timeout = 200ms;
  c.max_tries = 4;
  return c;
}

// Silent unless KILN_TEST_LOG=debug is set (handy when a test fails).
Logger quiet() {
  const char* env = std::getenv("KILN_TEST_LOG");
  LogLevel level = LogLevel::kOff;
  if (env != nullptr) parse_log_level(env, &level);
  return Logger(level);
}

// Never co_await inside a Catch macro: GCC 12 evaluates the co_await in the
// macro's unevaluated-looking branches too (the operation runs several times).

// Runs `body` on the io_context with the fake BMC serving, then stops it.
void run(asio::io_context& ioc, FakeBmc& bmc, std::function<asio::awaitable<void>()> body) {
  bmc.start();
  std::exception_ptr failure;
  bool finished = false;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await body();
        bmc.stop();
      },
      [&](std::exception_ptr e) {
        failure = e;
        finished = true;
        bmc.stop();
      });
  ioc.run();
  if (failure) std::rethrow_exception(failure);
  REQUIRE(finished);
}

SteadyClock::time_point in(std::chrono::milliseconds d) { return SteadyClock::now() + d; }

}  // namespace

TEST_CASE("session opens, runs commands, reuses itself and closes", "[session]") {
  for (int suite : {3, 17}) {
    INFO("suite " << suite);
    asio::io_context ioc;
    FakeBmc bmc(ioc, "admin", "secret");
    bmc.power = 1;
    run(ioc, bmc, [&]() -> asio::awaitable<void> {
      IpmiSession s(ioc.get_executor(), config_for(bmc, "secret", suite), quiet());
      auto r1 = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(2s));
      REQUIRE(r1.ok());
      CHECK(r1->completion_code == 0);
      CHECK(parse_chassis_status(r1->data)->power_on);
      const Bytes power_down(1, 0x00);  // named: GCC 12 rejects init-lists in co_await
      auto r2 = co_await s.command(kNetFnChassis, kCmdChassisControl, power_down, in(2s));
      REQUIRE(r2.ok());
      auto r3 = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(2s));
      REQUIRE(r3.ok());
      CHECK_FALSE(parse_chassis_status(r3->data)->power_on);
      auto r4 = co_await s.command(kNetFnApp, 0x99, {}, in(2s));  // unknown command
      REQUIRE(r4.ok());
      CHECK(r4->completion_code == 0xC1);
      CHECK(s.active());
      co_await s.close(in(1s));
      CHECK_FALSE(s.active());
    });
    CHECK(bmc.sessions_opened == 1);
    CHECK(bmc.sessions_closed == 1);
    CHECK(bmc.commands_seen[kCmdSetSessionPrivilege] == 1);
  }
}

TEST_CASE("wrong password fails RAKP2 with kUnauthenticated", "[session]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    IpmiSession s(ioc.get_executor(), config_for(bmc, "not-the-password"), quiet());
    auto st = co_await s.open(in(2s));
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == Code::kUnauthenticated);
    CHECK_THAT(st.error().message, Catch::Contains("RAKP2 integrity check failed: wrong password?"));
  });
  CHECK(bmc.sessions_opened == 0);
}

TEST_CASE("unknown user is refused with the BMC's RAKP status text", "[session]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "root", "secret");
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    IpmiSession s(ioc.get_executor(), config_for(bmc), quiet());
    auto st = co_await s.open(in(2s));
    REQUIRE_FALSE(st.ok());
    CHECK(st.error().code == Code::kUnauthenticated);
    CHECK_THAT(st.error().message, Catch::Contains("0x0D unauthorized name"));
  });
}

TEST_CASE("lost replies are retransmitted with backoff", "[session]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    IpmiSession s(ioc.get_executor(), config_for(bmc), quiet());
    auto st1 = co_await s.open(in(2s));
    REQUIRE(st1.ok());
    bmc.drop_replies = 2;
    const auto t0 = SteadyClock::now();
    auto r = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(2s));
    REQUIRE(r.ok());
    // Two lost tries: 50 ms + 100 ms of waiting before the third answer.
    CHECK(SteadyClock::now() - t0 >= 150ms);
  });
  CHECK(bmc.commands_seen[kCmdGetChassisStatus] == 3);
  CHECK(bmc.sessions_opened == 1);
}

TEST_CASE("a reply with a forged MAC is dropped and the request retried", "[session]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  bmc.power = 1;
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    IpmiSession s(ioc.get_executor(), config_for(bmc), quiet());
    auto st2 = co_await s.open(in(2s));
    REQUIRE(st2.ok());
    bmc.corrupt_replies = 1;
    auto r = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(2s));
    REQUIRE(r.ok());
    CHECK(parse_chassis_status(r->data)->power_on);
  });
  CHECK(bmc.commands_seen[kCmdGetChassisStatus] == 2);
}

TEST_CASE("duplicated replies do not confuse later commands", "[session]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  bmc.duplicate_replies = true;
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    IpmiSession s(ioc.get_executor(), config_for(bmc), quiet());
    for (int i = 0; i < 5; ++i) {
      const Bytes control(1, static_cast<uint8_t>(i % 2));
      auto ctl = co_await s.command(kNetFnChassis, kCmdChassisControl, control, in(2s));
      REQUIRE(ctl.ok());
      CHECK(ctl->cmd == kCmdChassisControl);
      auto st = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(2s));
      REQUIRE(st.ok());
      REQUIRE(st->cmd == kCmdGetChassisStatus);
      CHECK(parse_chassis_status(st->data)->power_on == (i % 2 == 1));
    }
  });
  CHECK(bmc.sessions_opened == 1);
}

TEST_CASE("a session the BMC forgot is re-opened once", "[session]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    IpmiSession s(ioc.get_executor(), config_for(bmc), quiet());
    auto st3 = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(2s));
    REQUIRE(st3.ok());
    bmc.forget_sessions();
    auto r = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(3s));
    REQUIRE(r.ok());
  });
  CHECK(bmc.sessions_opened == 2);
}

TEST_CASE("a silent BMC times out within the deadline", "[session]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  bmc.silent = true;
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    SessionConfig c = config_for(bmc);
    c.max_tries = 100;  // the deadline, not the try count, must end it
    IpmiSession s(ioc.get_executor(), c, quiet());
    const auto t0 = SteadyClock::now();
    auto r = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(400ms));
    const auto took = SteadyClock::now() - t0;
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Code::kTimeout);
    CHECK_THAT(r.error().message, Catch::Contains("no answer from BMC"));
    CHECK(took >= 390ms);
    CHECK(took < 1s);
  });
}

TEST_CASE("commands to one BMC are spaced by min_spacing", "[session]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    SessionConfig c = config_for(bmc);
    c.min_spacing = 80ms;
    IpmiSession s(ioc.get_executor(), c, quiet());
    // t0 before the handshake: its last send is after t0, and each of the 3
    // commands waits 80 ms after the previous send (the first after that
    // last handshake send), so the third is sent at least 240 ms after t0.
    // (Taking t0 after open() made the bound a race by the handshake's own
    // 80 ms wait: it once measured 239.93 ms.)
    const auto t0 = SteadyClock::now();
    auto st4 = co_await s.open(in(3s));
    REQUIRE(st4.ok());
    for (int i = 0; i < 3; ++i) {
      auto st5 = co_await s.command(kNetFnChassis, kCmdGetChassisStatus, {}, in(2s));
      REQUIRE(st5.ok());
    }
    CHECK(SteadyClock::now() - t0 >= 240ms);
  });
}

// ---- Driver over the fake BMC ----------------------------------------------------------

namespace {

DriverTarget target_for(const FakeBmc& bmc, std::string password = "secret") {
  DriverTarget t;
  t.node_id = "node-1";
  t.bmc.driver = "ipmi";
  t.bmc.address = bmc.address();
  t.bmc.username = "admin";
  t.bmc.options = nlohmann::json{{"timeout_ms", 50}, {"retries", 3}};
  t.password = std::move(password);
  t.boot_mode = "uefi";
  return t;
}

IpmiDriverOptions fast_options() {
  IpmiDriverOptions o;
  o.poll_interval = 20ms;
  o.power_timeout = 2s;
  o.command_deadline = 2s;
  return o;
}

}  // namespace

TEST_CASE("driver validate refuses bad BMC fields without I/O", "[driver]") {
  asio::io_context ioc;
  auto d = make_ipmi_driver(ioc.get_executor(), IpmiDriverOptions{}, quiet());
  REQUIRE(d->power);
  REQUIRE(d->management);
  CHECK(d->name == "ipmi");
  BmcInfo b;
  b.driver = "ipmi";
  auto missing = d->power->validate(b);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == Code::kInvalidArgument);
  CHECK(missing.error().fields.at(0).field == "/bmc/address");

  b.address = "10.1.2.3";
  b.username = "admin";
  CHECK(d->power->validate(b).ok());
  CHECK(d->management->validate(b).ok());

  b.options = nlohmann::json{{"cipher_suite", 2}};
  CHECK(d->power->validate(b).error().fields.at(0).field == "/bmc/options/cipher_suite");
  b.options = nlohmann::json{{"retries", "three"}};
  CHECK(d->power->validate(b).error().fields.at(0).field == "/bmc/options/retries");
  b.options = nlohmann::json{{"timeout_ms", 5}};
  CHECK(d->power->validate(b).error().fields.at(0).field == "/bmc/options/timeout_ms");
  b.options = nlohmann::json{{"cipher_suite", 17}, {"retries", 2}, {"timeout_ms", 500}};
  CHECK(d->power->validate(b).ok());
  b.username = std::string(17, 'u');
  CHECK(d->power->validate(b).error().fields.at(0).field == "/bmc/username");
}

TEST_CASE("driver powers on/off/reboot/soft-off and reads state back", "[driver]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  auto d = make_ipmi_driver(ioc.get_executor(), fast_options(), quiet());
  const DriverTarget t = target_for(bmc);
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    auto p0 = co_await d->power->get_power_state(t);
    REQUIRE(p0.ok());
    CHECK(*p0 == PowerState::kOff);
    auto st6 = co_await d->power->set_power_state(t, PowerAction::kOn);
    REQUIRE(st6.ok());
    auto ps13 = co_await d->power->get_power_state(t);
    REQUIRE(ps13.ok());
    CHECK(*ps13 == PowerState::kOn);
    auto st7 = co_await d->power->set_power_state(t, PowerAction::kReboot);
    REQUIRE(st7.ok());
    auto ps14 = co_await d->power->get_power_state(t);
    REQUIRE(ps14.ok());
    CHECK(*ps14 == PowerState::kOn);
    auto st8 = co_await d->power->set_power_state(t, PowerAction::kSoftOff);
    REQUIRE(st8.ok());
    auto ps15 = co_await d->power->get_power_state(t);
    REQUIRE(ps15.ok());
    CHECK(*ps15 == PowerState::kOff);
    auto st9 = co_await d->power->set_power_state(t, PowerAction::kOff);
    REQUIRE(st9.ok());  // already off
    auto st10 = co_await d->management->verify(t);
    REQUIRE(st10.ok());
  });
  CHECK(bmc.sessions_opened == 1);  // one cached session for every call
  CHECK(bmc.commands_seen[kCmdChassisControl] == 3);  // on, cycle, soft; not the no-op off
}

TEST_CASE("driver sets the boot device with the ipmitool sequence and reads it back", "[driver]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  auto d = make_ipmi_driver(ioc.get_executor(), fast_options(), quiet());
  const DriverTarget t = target_for(bmc);
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    auto st11 = co_await d->management->set_boot_device(t, BootDevice::kPxe, true);
    REQUIRE(st11.ok());
    CHECK(bmc.boot_device == kBootDevicePxe);
    CHECK(bmc.boot_persistent);
    auto st12 = co_await d->management->set_boot_device(t, BootDevice::kDisk, false);
    REQUIRE(st12.ok());
    CHECK(bmc.boot_device == kBootDeviceDisk);
    CHECK_FALSE(bmc.boot_persistent);
  });
  // param 3, 0 (in progress), 4, 5, 0 (commit), 0 (complete) per call.
  CHECK(bmc.commands_seen[kCmdSetBootOptions] == 12);
  CHECK(bmc.commands_seen[kCmdGetBootOptions] == 2);
}

TEST_CASE("driver maps a wrong password to kUnauthenticated and a dead BMC to kTimeout",
          "[driver]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  auto d = make_ipmi_driver(ioc.get_executor(), fast_options(), quiet());
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    auto bad = co_await d->power->get_power_state(target_for(bmc, "wrong"));
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.error().code == Code::kUnauthenticated);
    // The right password afterwards works (the cache notices the change).
    auto good = co_await d->power->get_power_state(target_for(bmc, "secret"));
    REQUIRE(good.ok());
    bmc.silent = true;
    DriverTarget t = target_for(bmc);
    t.bmc.options["retries"] = 1;
    auto dead = co_await d->management->verify(t);
    REQUIRE_FALSE(dead.ok());
    CHECK(dead.error().code == Code::kTimeout);
  });
}

TEST_CASE("concurrent calls share one session per BMC and run in parallel across BMCs",
          "[driver]") {
  asio::io_context ioc;
  FakeBmc a(ioc, "admin", "secret");
  FakeBmc b(ioc, "admin", "secret");
  b.power = 1;
  auto d = make_ipmi_driver(ioc.get_executor(), fast_options(), quiet());
  const DriverTarget ta = target_for(a);
  const DriverTarget tb = target_for(b);
  int ok_a = 0, ok_b = 0, finished = 0;
  b.start();  // `run` starts and stops `a`; `b` is stopped by hand below
  run(ioc, a, [&]() -> asio::awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    for (int i = 0; i < 6; ++i) {
      const DriverTarget& t = (i % 2 == 0) ? ta : tb;
      int& ok = (i % 2 == 0) ? ok_a : ok_b;
      asio::co_spawn(
          ex,
          [&d, &finished, tp = &t, okp = &ok,
           want = (i % 2 == 0) ? PowerState::kOff : PowerState::kOn]() -> asio::awaitable<void> {
            auto p = co_await d->power->get_power_state(*tp);
            if (p.ok() && *p == want) ++*okp;
            ++finished;
          },
          asio::detached);
    }
    // Wait for the six spawned calls (they interleave on the io_context).
    asio::steady_timer tick(ex);
    for (int i = 0; i < 200 && finished < 6; ++i) {
      tick.expires_after(10ms);
      co_await tick.async_wait(asio::use_awaitable);
    }
    b.stop();
  });
  CHECK(finished == 6);
  CHECK(ok_a == 3);
  CHECK(ok_b == 3);
  CHECK(a.sessions_opened == 1);
  CHECK(b.sessions_opened == 1);
  CHECK(a.commands_seen[kCmdGetChassisStatus] == 3);
}

TEST_CASE("destroying the driver closes its cached sessions", "[driver]") {
  asio::io_context ioc;
  FakeBmc bmc(ioc, "admin", "secret");
  auto d = make_ipmi_driver(ioc.get_executor(), fast_options(), quiet());
  const DriverTarget t = target_for(bmc);
  run(ioc, bmc, [&]() -> asio::awaitable<void> {
    auto p = co_await d->power->get_power_state(t);
    REQUIRE(p.ok());
    d.reset();  // sends Close Session without waiting
    asio::steady_timer settle(co_await asio::this_coro::executor, 50ms);
    co_await settle.async_wait(asio::use_awaitable);
  });
  CHECK(bmc.sessions_opened == 1);
  CHECK(bmc.sessions_closed == 1);
}
