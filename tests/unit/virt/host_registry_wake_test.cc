// When the host registry's check loop wakes: never with no host on a sole
// kilnd, every check_interval once a host is known (or always, between kilnd
// sharing a store, to find hosts registered elsewhere), and when a failed
// connect's backoff ends. Against libvirt's test:///default driver and a
// loopback port nothing listens on; the loop's passes are counted
// (checks_for_test), not timed.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/hosts/host_registry.h"
#include "controller/store/store.h"
#include "tests/support/wait_until.h"

using namespace kiln;
using namespace std::chrono_literals;

namespace {

class Registry {
 public:
  explicit Registry(HostRegistryOptions o) : work_(asio::make_work_guard(io_)), virt_(2), box_(SecretBox::Key{9, 9, 9}) {
    char tmpl[] = "/tmp/kiln-hostwake-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
    REQUIRE(s);
    store_ = std::move(*s);
    REQUIRE(store_->migrate());
    hosts_ = std::make_unique<HostRegistry>(io_, *store_, virt_, box_, o, Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Registry() {
    hosts_->stop();
    work_.reset();
    io_.stop();
    thread_.join();
    virt_.stop();
    hosts_.reset();
    std::filesystem::remove_all(dir_);
  }

  void start() { asio::co_spawn(io_, hosts_->start(), asio::use_future).get(); }

  // A host row, as the API (or another kilnd) writes it.
  Host add_row(const std::string& name, const std::string& uri) {
    Host h;
    h.name = name;
    h.uri = uri;
    h.status = "connecting";
    auto created = store_->create_host(h);
    REQUIRE(created);
    return *created;
  }

  std::string status(const std::string& id) {
    auto h = store_->get_host(id);
    REQUIRE(h);
    return h->status;
  }

  HostRegistry& hosts() { return *hosts_; }

 private:
  std::string dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool virt_;
  SecretBox box_;
  std::unique_ptr<NodeStore> store_;
  std::unique_ptr<HostRegistry> hosts_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("host registry: with no host on a sole kilnd the check loop never wakes, and checks once one is registered") {
  HostRegistryOptions o;
  o.check_interval = 20ms;  // the loop used to wake at this rate with nothing to check
  o.sole = true;
  Registry r(o);
  r.start();
  CHECK(r.hosts().checks_for_test() == 1);  // start()'s own pass
  std::this_thread::sleep_for(1s);
  CHECK(r.hosts().checks_for_test() == 1);

  // Registered through the API: connected in the background, then checked
  // every interval like any known host.
  Host h = r.add_row("hv-test", "test:///default");
  r.hosts().connect_in_background(h.id);
  REQUIRE(testing::wait_until([&] { return r.status(h.id) == "ready"; }, 5s));
  REQUIRE(testing::wait_until([&] { return r.hosts().checks_for_test() >= 5; }, 5s));
}

TEST_CASE("host registry: between kilnd sharing a store, a host registered by another is found by the check") {
  HostRegistryOptions o;
  o.check_interval = 50ms;
  o.sole = false;
  Registry r(o);
  r.start();
  // Nothing here registers it: only the periodic check can find the row.
  Host h = r.add_row("hv-elsewhere", "test:///default");
  REQUIRE(testing::wait_until([&] { return r.status(h.id) == "ready"; }, 5s));
  CHECK(r.hosts().connection(h.id));
}

TEST_CASE("host registry: a failed connect is retried when its backoff ends, without a periodic check") {
  HostRegistryOptions o;
  o.check_interval = 1h;  // no check comes by itself
  o.initial_backoff = 100ms;
  o.max_backoff = 200ms;
  o.connect_timeout = 5s;
  o.sole = true;
  Registry r(o);
  r.start();
  // Port 1 on loopback: refused at once, so every connect fails fast.
  Host h = r.add_row("hv-down", "qemu+tcp://127.0.0.1:1/system");
  r.hosts().connect_in_background(h.id);
  REQUIRE(testing::wait_until([&] { return r.status(h.id) == "unreachable"; }, 5s));
  // Each failure's backoff (100-200 ms) ends in a retry.
  CHECK(testing::wait_until([&] { return r.hosts().connects_started_for_test() >= 4; }, 5s));
  // Deleted: no retry after it.
  r.hosts().forget(h.id);
  std::this_thread::sleep_for(300ms);
  const int at_forget = r.hosts().connects_started_for_test();
  std::this_thread::sleep_for(600ms);
  CHECK(r.hosts().connects_started_for_test() == at_forget);
}
