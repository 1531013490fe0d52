#pragma once
// In-process harness for the API tests: a real SQLite store in a temp dir
// (or a PostgreSQL database, as kilnd with --database runs; several
// harnesses on one database are several kilnd sharing it), a real Conductor
// with the fake driver, a real SecretBox, a real HostRegistry
// (its check loop running; hosts only where a test registers them), and Api::handle()
// called directly with Beast requests (no sockets). The io_context runs on its
// own thread, so conductor operations proceed in the background while a test
// polls; each call blocks on a future until its Reply is ready.

#include <utility>  // before Asio: Boost 1.74 awaitable.hpp uses std::exchange

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "controller/api/api.h"
#include "controller/boot/boot_script.h"
#include "controller/conductor/conductor.h"
#include "controller/hosts/host_registry.h"
#include "controller/tenancy/allocation_engine.h"
#include "drivers/driver.h"

namespace kiln::test {

// Captures every log line so tests can grep for secrets.
class RecordingSink : public LogSink {
 public:
  void write(std::string_view line) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(line);
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  std::string all() const {
    std::string out;
    for (const std::string& l : lines()) out += l;
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

struct Resp {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
  nlohmann::json json;  // parsed when the body is JSON, else null
  http::Reply reply;    // the raw reply (for streams)

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
  // The first problem field error's pointer, or "" when none.
  std::string field() const {
    if (!json.is_object() || !json.contains("errors") || json["errors"].empty()) return "";
    return json["errors"][0]["field"];
  }
  bool has_field(const std::string& f, const std::string& message = "") const {
    if (!json.is_object() || !json.contains("errors")) return false;
    for (const auto& e : json["errors"])
      if (e["field"] == f && (message.empty() || e["message"] == message)) return true;
    return false;
  }
};

struct Options {
  std::map<std::string, std::string> headers;
  std::string content_type = "application/json";
};

class ApiHarness {
 public:
  static constexpr const char* kAdminSecret = "kiln_bootstrap_secret_for_tests_0001";

  // `portal`, when given, is served as kilnd serves web/dist (portal.h).
  // `database`: a postgresql:// URL of a migrated or empty database to run
  // on, as a kilnd sharing it with others (a conductor heartbeat every 30 s,
  // so that a test sees the read cache between two of them); empty: SQLite
  // in the harness's own directory, the only kilnd on it.
  explicit ApiHarness(std::chrono::milliseconds keepalive = std::chrono::seconds(15),
                      HostRegistryOptions hosts = HostRegistryOptions(),
                      const api::PortalAssets* portal = nullptr, const std::string& database = "");
  ~ApiHarness();

  // Sends one request; `token` "" means no Authorization header.
  Resp call(http::bhttp::verb method, const std::string& target, const std::string& token,
            const std::string& body = "", const Options& options = {});
  Resp call_json(http::bhttp::verb method, const std::string& target, const std::string& token,
                 const nlohmann::json& body, const Options& options = {}) {
    return call(method, target, token, body.dump(), options);
  }

  // Leases `mac` to the address every call() comes from (127.0.0.1) in the
  // DHCP lease file kilnd's boot data is bound to, so boot scripts and seeds
  // for a node owning `mac` are served to this harness's calls.
  void lease_to_caller(const std::string& mac);

  // Creates a token through the API with the admin token; returns its secret.
  std::string make_token(const std::string& role, const std::string& tenant = "",
                         const std::string& name = "t");

  // Enrolls a fake-driver node through the API; returns its JSON.
  nlohmann::json enroll(const std::string& name, nlohmann::json extra = nlohmann::json::object());

  // Polls GET /v1/nodes/{id} until provision_state is `state` and the node is free.
  nlohmann::json wait_state(const std::string& id, const std::string& state,
                            std::chrono::milliseconds limit = std::chrono::seconds(10));

  template <typename T>
  T sync(asio::awaitable<T> a);

  Api& api() { return *api_; }
  NodeStore& store() { return *store_; }
  Membership& membership() { return *membership_; }
  HostRegistry& hosts() { return *hosts_; }
  AllocationEngine& allocations() { return *allocations_; }
  const SecretBox& secrets() const { return box_; }
  RecordingSink& log() { return *sink_; }
  asio::io_context& io() { return io_; }
  const std::string& admin() const { return admin_; }

 private:
  std::string dir_;
  boot::BootSettings boot_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  BlockingPool db_;
  BlockingPool virt_;
  SecretBox box_;
  SystemClock clock_;
  std::unique_ptr<NodeStore> store_;
  DriverRegistry drivers_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<Conductor> conductor_;
  std::shared_ptr<RecordingSink> sink_;
  std::unique_ptr<HostRegistry> hosts_;
  std::unique_ptr<AllocationEngine> allocations_;
  std::unique_ptr<Api> api_;
  std::thread thread_;
  std::string admin_ = kAdminSecret;
};

std::string mac(int n);  // distinct MACs "52:54:00:00:HH:LL"

}  // namespace kiln::test

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>

namespace kiln::test {
template <typename T>
T ApiHarness::sync(asio::awaitable<T> a) {
  return asio::co_spawn(io_, std::move(a), asio::use_future).get();
}
}  // namespace kiln::test
