#include "tests/unit/api/api_harness.h"

#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "controller/conductor/membership.h"
#include "controller/store/open_store.h"
#include "drivers/fake/fake_driver.h"

namespace kiln::test {
namespace {

std::string make_dir() {
  char tmpl[] = "/tmp/kiln-api-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  return tmpl;
}

ConductorOptions fast_conductor() {
  ConductorOptions o;
  o.default_timeout = std::chrono::seconds(30);
  o.timeout_check_interval = std::chrono::milliseconds(20);
  return o;
}

}  // namespace

std::string mac(int n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "52:54:00:00:%02x:%02x", (n >> 8) & 0xff, n & 0xff);
  return buf;
}

ApiHarness::ApiHarness(std::chrono::milliseconds keepalive, HostRegistryOptions hosts,
                       const api::PortalAssets* portal, const std::string& database)
    : dir_(make_dir()), work_(asio::make_work_guard(io_)), db_(2), virt_(2),
      box_(SecretBox::Key{7, 7, 7, 1, 2, 3}), sink_(std::make_shared<RecordingSink>()) {
  if (database.empty()) {
    auto s = open_sqlite_store({.path = dir_ + "/kiln.db", .clock = &clock_});
    REQUIRE(s);
    store_ = std::move(*s);
  } else {
    auto s = open_store({.database = database, .data_dir = dir_, .connections = 6, .clock = &clock_});
    INFO((s ? std::string() : s.error().message));
    REQUIRE(s);
    store_ = std::move(*s);
  }
  REQUIRE(store_->migrate());
  drivers_.add(make_fake_driver(io_.get_executor()));
  // A conductor as kilnd runs one: the only one on its SQLite file, or one
  // of those sharing the PostgreSQL database, whose heartbeats are commits
  // that end what the read cache keeps (read_cache.h): rare here, so a test
  // can see an answer kept between two requests.
  MembershipOptions mopt;
  mopt.host = "api-test";
  mopt.api_url = "http://kiln.test:8080";
  mopt.heartbeat_interval = std::chrono::milliseconds(100);
  mopt.sole = database.empty();
  if (!database.empty()) {
    // Each its own host: a kilnd that finds its host and URL registered
    // takes that registration for its own previous process's.
    static std::atomic<int> instance{0};
    mopt.host = "api-test-" + std::to_string(instance++);
    mopt.heartbeat_interval = std::chrono::seconds(30);
    mopt.timeout = std::chrono::seconds(120);
  }
  membership_ = std::make_unique<Membership>(io_, *store_, db_, clock_, mopt, Logger(sink_, LogLevel::kDebug));
  ConductorOptions copt = fast_conductor();
  copt.membership = membership_.get();
  conductor_ = std::make_unique<Conductor>(io_, *store_, db_, drivers_, box_, clock_, copt,
                                           Logger(sink_, LogLevel::kDebug));
  REQUIRE(bootstrap_admin_token(*store_, kAdminSecret, clock_));
  hosts_ = std::make_unique<HostRegistry>(io_, *store_, virt_, box_, hosts, Logger(sink_, LogLevel::kDebug));
  ApiDeps deps{*store_, db_, *conductor_, box_, clock_, Logger(sink_, LogLevel::kDebug),
               [] { return std::size_t{3}; }, keepalive};
  deps.hosts = hosts_.get();
  deps.portal = portal;
  // Boot data bound as kilnd binds it to its dnsmasq's leases; lease_to_caller
  // adds the MACs a test fetches boot data for.
  boot_.binding = boot::LeaseBinding::kLeaseFile;
  boot_.lease_file = dir_ + "/dhcp.leases";
  std::ofstream(boot_.lease_file).flush();
  deps.boot = &boot_;
  AllocationEngineOptions aopt;
  aopt.interval = std::chrono::milliseconds(50);
  aopt.membership = membership_.get();
  allocations_ = std::make_unique<AllocationEngine>(io_, *store_, db_, *conductor_, clock_, aopt,
                                                    Logger(sink_, LogLevel::kDebug));
  deps.allocations = allocations_.get();
  // As kilnd wires it (main.cc): every committed event kicks the engine,
  // which otherwise sleeps while its allocations are settled.
  AllocationEngine* engine = allocations_.get();
  deps.on_events = [engine](int64_t) { engine->kick(); };
  api_ = std::make_unique<Api>(std::move(deps));
  thread_ = std::thread([this] { io_.run(); });
  REQUIRE(sync(membership_->start()));
  REQUIRE(sync(conductor_->start()));
  allocations_->start();
  sync(hosts_->start());
  api_->set_ready(true);
}

ApiHarness::~ApiHarness() {
  api_->shutdown();
  allocations_->stop();
  conductor_->stop();
  hosts_->stop();
  work_.reset();
  io_.stop();
  thread_.join();
  db_.stop();
  virt_.stop();
  api_.reset();
  allocations_.reset();
  hosts_.reset();
  conductor_.reset();
  membership_.reset();
  store_.reset();
  std::filesystem::remove_all(dir_);
}

void ApiHarness::lease_to_caller(const std::string& mac) {
  std::ofstream(boot_.lease_file, std::ios::app) << "0 " << mac << " 127.0.0.1 * *\n";
}

Resp ApiHarness::call(http::bhttp::verb method, const std::string& target, const std::string& token,
                      const std::string& body, const Options& options) {
  http::Request req{method, target, 11};
  req.set(http::bhttp::field::host, "kiln.test:8080");
  if (!token.empty()) req.set(http::bhttp::field::authorization, "Bearer " + token);
  if (!body.empty() && !options.content_type.empty())
    req.set(http::bhttp::field::content_type, options.content_type);
  for (const auto& [k, v] : options.headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::RequestInfo info{"req-" + std::to_string(reinterpret_cast<uintptr_t>(&req) % 100000), "127.0.0.1:1", false};

  Resp r;
  r.reply = sync(api_->handle(req, info));
  r.status = static_cast<int>(r.reply.response.result_int());
  for (const auto& f : r.reply.response) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = std::string(f.value());
  }
  r.body = r.reply.shared_body ? *r.reply.shared_body : r.reply.response.body();  // a kept answer is shared
  r.json = nlohmann::json::parse(r.body, nullptr, false);
  if (r.json.is_discarded()) r.json = nullptr;
  return r;
}

std::string ApiHarness::make_token(const std::string& role, const std::string& tenant,
                                   const std::string& name) {
  nlohmann::json body = {{"name", name}, {"role", role}};
  if (!tenant.empty()) body["tenant"] = tenant;
  if (role == "tenant" && !tenant.empty()) {  // a tenant token names an existing tenant
    Resp made = call_json(http::bhttp::verb::post, "/v1/tenants", admin_, {{"name", tenant}});
    REQUIRE((made.status == 201 || made.status == 409));
  }
  Resp r = call_json(http::bhttp::verb::post, "/v1/tokens", admin_, body);
  REQUIRE(r.status == 201);
  return r.json["token"];
}

nlohmann::json ApiHarness::enroll(const std::string& name, nlohmann::json extra) {
  nlohmann::json body = {{"name", name},
                         {"bmc", {{"driver", "fake"}, {"address", "bmc-" + name}, {"username", "root"},
                                  {"password", "pw-" + name}}}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = *it;
  Resp r = call_json(http::bhttp::verb::post, "/v1/nodes", admin_, body);
  INFO(r.body);
  REQUIRE(r.status == 201);
  return r.json;
}

nlohmann::json ApiHarness::wait_state(const std::string& id, const std::string& state,
                                      std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  nlohmann::json last;
  while (std::chrono::steady_clock::now() < end) {
    Resp r = call(http::bhttp::verb::get, "/v1/nodes/" + id, admin_);
    REQUIRE(r.status == 200);
    last = r.json;
    if (last["provision_state"] == state && last["reservation"].is_null()) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("node " << id << " did not reach " << state << ": " << last.dump());
  return last;
}

}  // namespace kiln::test
