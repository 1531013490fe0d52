// /v1/hosts against hypervisors that do not answer, credentials in URIs and
// BMC addresses, and the one validator of the fields every node has.
//
// The hypervisors here are loopback listeners (HypervisorStub): libvirt's
// qemu+tcp:// client connects and then waits for an answer that never comes,
// as an unreachable or wedged host makes it wait. Nothing leaves the machine.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/unit/api/api_harness.h"

using namespace kiln;
using namespace kiln::test;
using namespace std::chrono_literals;
using nlohmann::json;
using V = http::bhttp::verb;

namespace {

// Accepts on 127.0.0.1:<port>, counts connections, never sends a byte, and
// closes each one after `hold` (0: at once) or when the stub is destroyed.
class HypervisorStub {
 public:
  explicit HypervisorStub(std::chrono::milliseconds hold) : hold_(hold) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~HypervisorStub() {
    stop_ = true;
    thread_.join();
    for (const Held& h : held_) ::close(h.fd);
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }
  std::string uri(const std::string& user = "") const {
    return "qemu+tcp://" + (user.empty() ? "" : user + "@") + "127.0.0.1:" + std::to_string(port_) + "/system";
  }

 private:
  struct Held {
    int fd;
    std::chrono::steady_clock::time_point until;
  };
  void run() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 10) == 1) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c >= 0) {
          ++accepted_;
          held_.push_back({c, std::chrono::steady_clock::now() + hold_});
        }
      }
      auto now = std::chrono::steady_clock::now();
      for (auto it = held_.begin(); it != held_.end();) {
        if (now >= it->until) {
          ::close(it->fd);
          it = held_.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  std::chrono::milliseconds hold_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::atomic<bool> stop_{false};
  std::vector<Held> held_;  // only the thread touches it until the destructor joins
  std::thread thread_;
};

HostRegistryOptions quick_hosts() {
  HostRegistryOptions o;
  o.check_interval = 50ms;
  o.initial_backoff = 50ms;
  o.max_backoff = 100ms;
  o.connect_timeout = 1s;
  return o;
}

// Polls GET /v1/hosts/{id} until its status is `status`; returns the host.
json wait_host(ApiHarness& h, const std::string& id, const std::string& status,
               std::chrono::milliseconds limit = 5s) {
  auto end = std::chrono::steady_clock::now() + limit;
  json last;
  while (std::chrono::steady_clock::now() < end) {
    Resp r = h.call(V::get, "/v1/hosts/" + id, h.admin());
    REQUIRE(r.status == 200);
    last = r.json;
    if (last["status"] == status) return last;
    std::this_thread::sleep_for(20ms);
  }
  FAIL("host " << id << " never became " << status << ": " << last.dump());
  return last;
}

std::chrono::milliseconds since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t);
}

void create_virtual_profile(ApiHarness& h) {
  Profile p;
  p.name = "vm-small";
  p.doc = {{"name", "vm-small"},
           {"plans", {{"quick", json::array()}, {"full", json::array()}}},
           {"virtual", {{"vcpus", 1}, {"memory_mib", 128}, {"gpus", 0}, {"disk_gib", 1}, {"hugepages", false},
                        {"numa_pin", false}}}};
  REQUIRE(h.store().create_profile(p));
}

}  // namespace

TEST_CASE("POST /v1/hosts answers 201 at once for a hypervisor that never answers, then it turns unreachable") {
  ApiHarness h(15s, quick_hosts());
  HypervisorStub hv(8s);  // holds the connection far past connect_timeout
  auto t0 = std::chrono::steady_clock::now();
  Resp r = h.call_json(V::post, "/v1/hosts", h.admin(), {{"name", "wedged"}, {"uri", hv.uri()}});
  auto took = since(t0);
  INFO(r.body);
  REQUIRE(r.status == 201);
  CHECK(took < 1500ms);
  CHECK(r.json["status"] == "connecting");
  CHECK(r.header("location") == "/v1/hosts/" + r.json["id"].get<std::string>());
  // The deadline, not libvirt, ends the wait: unreachable with the reason.
  json host = wait_host(h, r.json["id"], "unreachable");
  CHECK(host["status_reason"].get<std::string>().find("connect timed out after 1s") != std::string::npos);
  CHECK(hv.accepted() >= 1);
  // The API stays responsive meanwhile: other requests are not queued behind it.
  t0 = std::chrono::steady_clock::now();
  CHECK(h.call(V::get, "/v1/hosts", h.admin()).status == 200);
  CHECK(since(t0) < 500ms);
}

TEST_CASE("a URI with a password is 400 naming /uri and the password is never echoed or logged") {
  ApiHarness h(15s, quick_hosts());
  const std::string secret = "hunter2-in-the-uri";
  for (const std::string& uri : {"qemu+ssh://root:" + secret + "@127.0.0.1:1/system",
                                 "qemu+tcp://:" + secret + "@127.0.0.1:1/system",
                                 "qemu+tls://admin:" + secret + "@127.0.0.1/system?no_verify=1"}) {
    Resp r = h.call_json(V::post, "/v1/hosts", h.admin(), {{"name", "pw-in-uri"}, {"uri", uri}});
    INFO(uri << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(r.has_field("/uri"));
    CHECK(r.body.find("password field") != std::string::npos);
    CHECK(r.body.find(secret) == std::string::npos);
  }
  CHECK(h.call(V::get, "/v1/hosts", h.admin()).json["hosts"].empty());
  CHECK(h.log().all().find(secret) == std::string::npos);
}

TEST_CASE("a bare user in the URI is fine, and the password field is sealed and never shown or logged") {
  ApiHarness h(15s, quick_hosts());
  HypervisorStub hv(0ms);  // closes at once: libvirt fails fast, with its own message
  const std::string secret = "sealed-host-password-42";
  Resp r = h.call_json(V::post, "/v1/hosts", h.admin(),
                       {{"name", "with-user"}, {"uri", hv.uri("root")}, {"password", secret}});
  INFO(r.body);
  REQUIRE(r.status == 201);
  CHECK(r.json["uri"] == hv.uri("root"));
  CHECK(r.json["password_set"] == true);
  json host = wait_host(h, r.json["id"], "unreachable");
  CHECK_FALSE(host["status_reason"].get<std::string>().empty());
  CHECK(host.dump().find(secret) == std::string::npos);
  CHECK(h.log().all().find(secret) == std::string::npos);
}

TEST_CASE("a deleted host is never connected again: no reconnect, no timer, no late result") {
  ApiHarness h(15s, quick_hosts());
  HypervisorStub hv(1s);  // every connect fails after 1 s: the registry keeps retrying
  auto t0 = std::chrono::steady_clock::now();
  Resp r = h.call_json(V::post, "/v1/hosts", h.admin(), {{"name", "doomed"}, {"uri", hv.uri()}});
  REQUIRE(r.status == 201);
  CHECK(since(t0) < 900ms);  // answered before the first connect could end
  std::string id = r.json["id"];
  // Retries happen while it exists.
  auto end = std::chrono::steady_clock::now() + 5s;
  while (hv.accepted() < 2 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(10ms);
  REQUIRE(hv.accepted() >= 2);
  // Deleted with a connect in flight (each one lasts 1 s).
  REQUIRE(h.call(V::delete_, "/v1/hosts/" + id, h.admin()).status == 204);
  int at_delete = h.hosts().connects_started_for_test();
  int accepted_at_delete = hv.accepted();
  std::this_thread::sleep_for(2500ms);  // 50 check intervals; the in-flight connect ends meanwhile
  CHECK(h.hosts().connects_started_for_test() == at_delete);
  CHECK(hv.accepted() <= accepted_at_delete + 1);  // at most the connect already on its way
  CHECK(h.call(V::get, "/v1/hosts/" + id, h.admin()).status == 404);
  auto c = h.hosts().connection(id);
  REQUIRE_FALSE(c);
  CHECK(c.error().code == Code::kNotFound);
  // Asking again (a stale request) does not bring it back.
  h.hosts().connect_in_background(id);
  std::this_thread::sleep_for(200ms);
  CHECK(h.hosts().connects_started_for_test() == at_delete);
}

TEST_CASE("a BMC address with credentials is 400 naming /bmc/address, never echoed or logged") {
  ApiHarness h;
  const std::string secret = "bmc-secret-in-address";
  for (const std::string& address : {"https://admin:" + secret + "@10.0.0.1", "admin:" + secret + "@10.0.0.1:623",
                                     "https://" + secret + "@10.0.0.1/redfish/v1"}) {
    json body = {{"name", "n1"}, {"bmc", {{"driver", "fake"}, {"address", address}, {"username", "root"}}}};
    Resp r = h.call_json(V::post, "/v1/nodes", h.admin(), body);
    INFO(address << " -> " << r.body);
    CHECK(r.status == 400);
    CHECK(r.has_field("/bmc/address"));
    CHECK(r.body.find(secret) == std::string::npos);
  }
  // PATCH goes through the same rule.
  json node = h.enroll("n2");
  std::string id = node["id"];
  json patch = {{"bmc", {{"address", "https://admin:" + secret + "@10.0.0.2"}}}};
  Resp r = h.call_json(V::patch, "/v1/nodes/" + id, h.admin(), patch);
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(r.has_field("/bmc/address"));
  CHECK(r.body.find(secret) == std::string::npos);
  CHECK(h.log().all().find(secret) == std::string::npos);
  // An @ past the authority (in a path) is not a credential.
  json ok = {{"name", "n3"},
             {"bmc", {{"driver", "fake"}, {"address", "https://10.0.0.3/redfish@v1"}, {"username", "root"}}}};
  CHECK(h.call_json(V::post, "/v1/nodes", h.admin(), ok).status == 201);
}

TEST_CASE("virtual and bare-metal nodes share one validator: the same shapes are refused naming the same field") {
  ApiHarness h;
  create_virtual_profile(h);
  const std::string mib(1 << 20, 't');
  struct Shape {
    const char* what;
    json fields;
    std::string field;
  };
  std::vector<Shape> shapes = {
      {"1 MiB tenant", {{"tenant", mib}}, "/tenant"},
      {"256-character tenant", {{"tenant", std::string(256, 'x')}}, "/tenant"},
      {"empty trait", {{"traits", json::array({"CUSTOM_OK", ""})}}, "/traits/1"},
      {"1 MiB trait", {{"traits", json::array({mib})}}, "/traits/0"},
      {"bad name", {{"name", "has space"}}, "/name"},
      {"UUID name", {{"name", "0b4c2f6e-4a1b-4c52-9d3e-2f1a6b7c8d9e"}}, "/name"},
      {"bad boot_mode", {{"boot_mode", "pxe"}}, "/boot_mode"},
      {"1 MiB profile", {{"profile", mib}}, "/profile"},
  };
  int n = 0;
  for (const Shape& s : shapes) {
    json bare = {{"name", "bm" + std::to_string(n)},
                 {"bmc", {{"driver", "fake"}, {"address", "bmc-" + std::to_string(n)}, {"username", "root"}}}};
    json virt = {{"kind", "virtual"}, {"name", "vm" + std::to_string(n)}, {"profile", "vm-small"}};
    ++n;
    for (auto it = s.fields.begin(); it != s.fields.end(); ++it) {
      bare[it.key()] = *it;
      virt[it.key()] = *it;
    }
    Resp b = h.call_json(V::post, "/v1/nodes", h.admin(), bare);
    Resp v = h.call_json(V::post, "/v1/nodes", h.admin(), virt);
    INFO(s.what << ": bare " << b.body.substr(0, 300) << " virtual " << v.body.substr(0, 300));
    CHECK(b.status == 400);
    CHECK(b.has_field(s.field));
    CHECK(v.status == 400);
    CHECK(v.has_field(s.field));
  }
  // A virtual node needs its profile; the well-formed one is created.
  Resp missing = h.call_json(V::post, "/v1/nodes", h.admin(), {{"kind", "virtual"}, {"name", "vm-np"}});
  CHECK(missing.status == 400);
  CHECK(missing.has_field("/profile", "required"));
  Resp empty = h.call_json(V::post, "/v1/nodes", h.admin(), {{"kind", "virtual"}, {"profile", ""}});
  CHECK(empty.status == 400);
  CHECK(empty.has_field("/profile"));
  json good = {{"kind", "virtual"}, {"name", "vm-ok"}, {"profile", "vm-small"}, {"tenant", "acme"},
               {"traits", json::array({"CUSTOM_GPU"})}, {"boot_mode", "bios"}};
  Resp ok = h.call_json(V::post, "/v1/nodes", h.admin(), good);
  INFO(ok.body);
  REQUIRE(ok.status == 201);
  CHECK(ok.json["tenant"] == "acme");
  CHECK(ok.json["traits"] == json::array({"CUSTOM_GPU"}));
  // PATCH of the virtual node is held to the same limits.
  std::string id = ok.json["id"];
  Resp p = h.call_json(V::patch, "/v1/nodes/" + id, h.admin(), {{"tenant", mib}});
  CHECK(p.status == 400);
  CHECK(p.has_field("/tenant"));
}
