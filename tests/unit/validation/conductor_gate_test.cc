// The gate and on-demand runs at the conductor (no API): a real SQLite store,
// the fake driver's scripted reports. Small enough to run under ASan quickly
// (the coroutine paths of Workflow::validate and Conductor::validate_now).
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/conductor/conductor.h"
#include "controller/store/store.h"
#include "drivers/fake/fake_driver.h"

using namespace kiln;
using namespace std::chrono_literals;
using nlohmann::json;
using S = ProvisionState;

namespace {

class Rig {
 public:
  Rig() : work_(asio::make_work_guard(io_)), db_(2), box_(SecretBox::Key{7}) {
    char tmpl[] = "/tmp/kiln-gate-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
    REQUIRE(s);
    store_ = std::move(*s);
    REQUIRE(store_->migrate());
    drivers_.add(make_fake_driver(io_.get_executor()));
    ConductorOptions o;
    o.timeout_check_interval = 20ms;
    conductor_ = std::make_unique<Conductor>(io_, *store_, db_, drivers_, box_, clock_, o, Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
    REQUIRE(asio::co_spawn(io_, conductor_->start(), asio::use_future).get());
    Profile p;
    p.name = "gpu8";
    p.doc = {{"gpu", {{"count", 8}}}, {"plans", {{"full", {"gpu_inventory", "gpu_health", "nccl_allreduce"}},
                                                 {"quick", {"gpu_inventory", "nccl_allreduce"}}}}};
    REQUIRE(store_->create_profile(p));
  }
  ~Rig() {
    conductor_->stop();
    work_.reset();
    io_.stop();
    thread_.join();
    db_.stop();
    std::filesystem::remove_all(dir_);
  }
  Node node(const std::string& name, json script, S state = S::kManageable) {
    Node n;
    n.name = name;
    n.profile = "gpu8";
    n.bmc.driver = "fake";
    n.bmc.address = "bmc";
    n.bmc.options = {{"validation_script", std::move(script)}};
    n.provision_state = state;
    auto r = store_->create_node(n, EventDraft{.type = "node.created"});
    REQUIRE(r);
    return *r;
  }
  Result<Node> provide(const std::string& n) {
    return asio::co_spawn(io_, conductor_->provision(n, ProvisionEvent::kProvide, {}, Actor{"t", "t", "admin", "r"}),
                          asio::use_future)
        .get();
  }
  Result<Node> validate_now(const std::string& n, ValidationPlan plan) {
    return asio::co_spawn(io_, conductor_->validate_now(n, plan, Actor{"t", "t", "admin", "r"}), asio::use_future)
        .get();
  }
  Node wait(const std::string& n, S state) {
    auto end = std::chrono::steady_clock::now() + 5s;
    Node cur;
    while (std::chrono::steady_clock::now() < end) {
      cur = *store_->get_node(n);
      if (cur.provision_state == state && cur.reservation.empty()) return cur;
      std::this_thread::sleep_for(5ms);
    }
    FAIL("node " << n << " is " << to_string(cur.provision_state) << " last_error=" << cur.last_error);
    return cur;
  }
  NodeStore& store() { return *store_; }

 private:
  std::string dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool db_;
  SecretBox box_;
  SystemClock clock_;
  std::unique_ptr<NodeStore> store_;
  DriverRegistry drivers_;
  std::unique_ptr<Conductor> conductor_;
  std::thread thread_;
};

}  // namespace

TEST_CASE("conductor gate: retry, quarantine, reports stored per attempt") {
  Rig r;
  r.node("ok", {"numeric_miss", "pass"});
  r.node("bad", {"numeric_miss"});
  r.node("xid", {"xid"});
  REQUIRE(r.provide("ok"));
  REQUIRE(r.provide("bad"));
  REQUIRE(r.provide("xid"));
  Node ok = r.wait("ok", S::kAvailable);
  Node bad = r.wait("bad", S::kQuarantined);
  Node xid = r.wait("xid", S::kQuarantined);
  auto ok_reports = r.store().list_validations(ok.id, "", 10, "");
  REQUIRE(ok_reports);
  REQUIRE(ok_reports->size() == 2);
  CHECK(ok_reports->at(0).result == "pass");
  CHECK(ok_reports->at(0).attempt == 2);
  CHECK(ok_reports->at(0).phase == "burn_in");
  CHECK(ok.last_validation == ok_reports->at(0).id);
  CHECK(r.store().list_validations(bad.id, "", 10, "")->size() == 2);
  CHECK_THAT(bad.last_error, Catch::Contains("attempt 2") && Catch::Contains("nccl_allreduce"));
  CHECK(r.store().list_validations(xid.id, "", 10, "")->size() == 1);
  CHECK_THAT(xid.last_error, Catch::Contains("XID 79"));
}

TEST_CASE("conductor on-demand: holds the node, stores the report, keeps the state") {
  Rig r;
  Node n = r.node("od", {"missing_gpu"}, S::kAvailable);
  auto started = r.validate_now("od", ValidationPlan::kFull);
  REQUIRE(started);
  CHECK_FALSE(started->reservation.empty());
  auto busy = r.validate_now("od", ValidationPlan::kQuick);
  if (!busy) CHECK(busy.error().code == Code::kConflict);  // unless the fake was already done
  Node after = r.wait("od", S::kAvailable);
  auto reports = r.store().list_validations(n.id, "", 10, "");
  REQUIRE(reports);
  REQUIRE_FALSE(reports->empty());
  CHECK(reports->back().phase == "on_demand");
  CHECK(reports->back().plan == "full");
  CHECK(reports->back().result == "fail");
  CHECK(after.last_validation == reports->front().id);
  Node plain = r.node("plain", json::array({"pass"}), S::kEnroll);
  auto refused = r.validate_now("plain", ValidationPlan::kQuick);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code == Code::kConflict);
}
