#pragma once
// The agent broker on a real SQLite store with its own I/O thread, shared by
// the broker and rendezvous tests: nodes in any state, lookups, heartbeats
// and results as an agent would send them.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "controller/agent/agent_broker.h"
#include "controller/store/sqlite.h"
#include "controller/store/store.h"

namespace kiln::testing {

using namespace std::chrono_literals;
using S = ProvisionState;
using nlohmann::json;

inline std::string make_dir() {
  char tmpl[] = "/tmp/kiln-agent-broker-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

inline AgentBrokerOptions fast() {
  AgentBrokerOptions o;
  o.poll_interval = 20ms;
  return o;
}

class Harness {
 public:
  Harness() : dir_(make_dir()), work_(asio::make_work_guard(io_)), db_(2) {
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
    REQUIRE(s);
    store_ = std::move(*s);
    REQUIRE(store_->migrate());
    broker_ = std::make_unique<AgentBroker>(*store_, db_, clock_, box_, fast(), Logger(LogLevel::kOff));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Harness() {
    broker_->shutdown();
    if (second_broker_) second_broker_->shutdown();
    work_.reset();
    io_.stop();
    thread_.join();
    db_.stop();
    std::filesystem::remove_all(dir_);
  }

  template <typename T>
  T sync(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future).get();
  }
  template <typename T>
  std::future<T> spawn(asio::awaitable<T> a) {
    return asio::co_spawn(io_, std::move(a), asio::use_future);
  }

  Node node(const std::string& name, const std::string& mac, S state, const std::string& step = "") {
    Node n;
    n.name = name;
    n.bmc.driver = "fake";
    n.bmc.address = "bmc";
    Port p;
    p.address = mac;
    n.ports.push_back(p);
    auto r = store_->create_node(n, EventDraft{.type = "node.created"});
    REQUIRE(r);
    return move(r->id, state, step);
  }
  Node move(const std::string& id, S state, const std::string& step = "") {
    auto r = store_->update_node_if(id, NodeCondition{},
                                    [&](Node& m) {
                                      m.provision_state = state;
                                      m.provision_step = step;
                                      return ok_status();
                                    },
                                    {});
    REQUIRE(r);
    return *r;
  }

  std::string mint(const Node& n) {
    Result<std::string> t = sync(broker_->boot_token(n));
    REQUIRE(t);
    return *t;
  }
  std::string os_secret(const Node& n) {
    Result<std::string> t = sync(broker_->os_secret(n));
    REQUIRE(t);
    return *t;
  }
  // `token` is the boot token in the ramdisk phase, the deploy secret in the os phase.
  Result<AgentLookupReply> lookup(const std::string& mac, const std::string& token, const std::string& phase,
                                  std::optional<std::vector<std::string>> addresses = std::nullopt) {
    AgentLookup l;
    l.addresses = std::move(addresses);
    l.macs = {mac};
    if (phase == "os") l.secret = token;
    else l.token = token;
    l.phase = phase;
    l.version = "test";
    return sync(broker_->lookup(l));
  }
  Result<AgentHeartbeatReply> heartbeat(const std::string& session, const std::string& node,
                                        std::optional<std::vector<std::string>> addresses = std::nullopt) {
    return sync(broker_->heartbeat(session, node, "", std::move(addresses)));
  }
  Status post(const std::string& session, const std::string& node, const std::string& id,
              const std::string& status, json result = json::object(), const std::string& error = "") {
    AgentResultPost p;
    p.node = node;
    p.command_id = id;
    p.status = status;
    p.result = std::move(result);
    p.error = error;
    return sync(broker_->post_result(session, p));
  }
  std::vector<std::string> event_types(const std::string& node_id) {
    auto evs = store_->list_events(0, 1000, node_id, std::nullopt);
    REQUIRE(evs);
    std::vector<std::string> out;
    for (const auto& e : *evs) out.push_back(e.type);
    return out;
  }
  // One column of the store file, read with a connection of our own.
  std::vector<std::string> column(const std::string& sql_text) {
    auto db = sql::Database::open(dir_ + "/kiln.db", sql::OpenOptions{});
    REQUIRE(db);
    auto st = (*db)->prepare(sql_text);
    REQUIRE(st);
    std::vector<std::string> out;
    for (;;) {
      auto row = (*st)->step();
      REQUIRE(row);
      if (!*row) break;
      out.push_back((*st)->column_text(0));
    }
    return out;
  }

  AgentBroker& broker() { return *broker_; }
  NodeStore& store() { return *store_; }
  BlockingPool& db() { return db_; }
  asio::io_context& io() { return io_; }
  // Another kilnd on the same database: its own store handle and its own
  // broker (nothing in memory shared with the first), same kiln.key, same
  // I/O thread. Made on first use.
  AgentBroker& second_broker() {
    if (!second_broker_) {
      auto s = open_sqlite_store({.path = dir_ + "/kiln.db"});
      REQUIRE(s);
      second_store_ = std::move(*s);
      second_broker_ =
          std::make_unique<AgentBroker>(*second_store_, db_, clock_, box_, fast(), Logger(LogLevel::kOff));
    }
    return *second_broker_;
  }
  // A second broker on the same store: what a restarted kilnd has.
  void restart_broker() {
    broker_->shutdown();
    broker_ = std::make_unique<AgentBroker>(*store_, db_, clock_, box_, fast(), Logger(LogLevel::kOff));
  }

 private:
  std::string dir_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool db_;
  SystemClock clock_;
  SecretBox box_{SecretBox::Key{7, 7, 7}};
  std::unique_ptr<NodeStore> store_;
  std::unique_ptr<AgentBroker> broker_;
  std::unique_ptr<NodeStore> second_store_;
  std::unique_ptr<AgentBroker> second_broker_;
  std::thread thread_;
};

inline bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

inline StillHeld flag_check(std::shared_ptr<std::atomic<bool>> flag) {
  return [flag]() -> asio::awaitable<bool> { co_return flag->load(); };
}


}  // namespace kiln::testing
