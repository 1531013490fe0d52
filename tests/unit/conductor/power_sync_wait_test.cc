// PowerSync waits for its concurrent workers without polling: while one BMC
// call is outstanding the sweep is parked and nothing at all runs on the
// io_context (it used to wake every 5 ms to look at a counter), and the
// sweep ends as soon as that last call returns. The io_context is driven by
// the test itself, so "nothing runs" is a count of handlers, not a timing.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <utility>  // before Asio (docs/coroutines.md)

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>
#include <optional>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "controller/conductor/power_sync.h"
#include "controller/store/store.h"
#include "tests/support/wait_until.h"

using namespace kiln;
using namespace std::chrono_literals;

namespace {

// Every call waits until the test opens that BMC's gate (a timer that never
// expires by itself); `entered` lists the BMCs in the order asked.
class GatedPower : public PowerInterface {
 public:
  explicit GatedPower(asio::io_context& io) : io_(io) {}
  Status validate(const BmcInfo&) const override { return ok_status(); }
  asio::awaitable<Result<PowerState>> get_power_state(const DriverTarget& t) override {
    auto gate = std::make_shared<asio::steady_timer>(io_, asio::steady_timer::time_point::max());
    gates[t.bmc.address] = gate;
    entered.push_back(t.bmc.address);
    boost::system::error_code ec;
    co_await gate->async_wait(asio::redirect_error(asio::use_awaitable, ec));
    co_return PowerState::kOn;
  }
  asio::awaitable<Status> set_power_state(const DriverTarget&, PowerAction) override { co_return ok_status(); }

  std::map<std::string, std::shared_ptr<asio::steady_timer>> gates;
  std::vector<std::string> entered;

 private:
  asio::io_context& io_;
};

}  // namespace

TEST_CASE("power sync: a sweep waits for its last worker without polling") {
  char tmpl[] = "/tmp/kiln-powerwait-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  {
    asio::io_context io;
    BlockingPool db(1);
    SecretBox box(SecretBox::Key{4, 5, 6});
    auto opened = open_sqlite_store({.path = dir + "/kiln.db"});
    REQUIRE(opened);
    std::unique_ptr<NodeStore> store = std::move(*opened);
    REQUIRE(store->migrate());
    for (int i = 0; i < 6; ++i) {
      Node n;
      n.name = "n" + std::to_string(i);
      n.provision_state = ProvisionState::kManageable;  // verified: power sync asks its BMC
      n.power_state = PowerState::kOn;
      n.bmc.driver = "gated";
      n.bmc.address = "bmc-" + n.name;
      n.bmc.username = "admin";
      n.bmc.password_sealed = box.seal("pw");
      REQUIRE(store->create_node(n, EventDraft{.type = "node.created"}));
    }
    DriverRegistry drivers;
    auto d = std::make_unique<Driver>();
    d->name = "gated";
    auto power = std::make_unique<GatedPower>(io);
    GatedPower* gated = power.get();
    d->power = std::move(power);
    drivers.add(std::move(d));

    PowerSyncOptions opt;
    opt.interval = 0ms;   // no loop: the test runs one sweep
    opt.concurrency = 6;  // one node each: the sweep itself and five spawned helpers
    PowerSync sync(io, *store, db, drivers, box, opt, Logger(LogLevel::kOff));
    std::optional<SweepStats> result;
    asio::co_spawn(io, [&]() -> asio::awaitable<void> { result = co_await sync.sweep_once(); }, asio::detached);

    // Every worker parks on its BMC's gate; the sweep's own worker asked first.
    bool parked = kiln::testing::wait_until([&] {
      io.run_for(5ms);
      return gated->entered.size() == 6;
    }, 10s, 0ms);
    REQUIRE(parked);
    // The sweep's own node answers: it now waits for the five helpers. With
    // every helper parked on a gate, no handler may run while it waits (the
    // old loop ran a 5 ms timer here: about 40 handlers in 200 ms).
    gated->gates[gated->entered[0]]->cancel();
    io.run_for(50ms);
    std::size_t ran = io.run_for(200ms);
    CHECK(ran == 0);
    CHECK_FALSE(result.has_value());

    // The helpers answer one by one; the sweep ends with the last of them.
    for (std::size_t i = 1; i < 6; ++i) {
      CHECK_FALSE(result.has_value());
      gated->gates[gated->entered[i]]->cancel();
      io.run_for(20ms);
    }
    bool done = kiln::testing::wait_until([&] {
      io.run_for(5ms);
      return result.has_value();
    }, 10s, 0ms);
    REQUIRE(done);
    CHECK(result->nodes == 6);
    CHECK(result->ok == 6);
    CHECK(sync.sweeps_done() == 1);
    sync.stop();
    io.run_for(10ms);
  }
  std::filesystem::remove_all(dir);
}
